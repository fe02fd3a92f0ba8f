var structpolicytrain_1_1callbacks_1_1StepPhases_1_1Span =
[
    [ "begin", "structpolicytrain_1_1callbacks_1_1StepPhases_1_1Span.html#ab56cb03bb025f2c3a118ac75ec75c09e", null ],
    [ "end", "structpolicytrain_1_1callbacks_1_1StepPhases_1_1Span.html#ad4176cd4414f90e667fa310c8abf0675", null ],
    [ "name", "structpolicytrain_1_1callbacks_1_1StepPhases_1_1Span.html#a11c5f3cc1c72a06203cbaafd65c3b5f9", null ]
];