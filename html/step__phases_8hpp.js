var step__phases_8hpp =
[
    [ "policytrain::callbacks::PhaseTimes", "structpolicytrain_1_1callbacks_1_1PhaseTimes.html", "structpolicytrain_1_1callbacks_1_1PhaseTimes" ],
    [ "policytrain::callbacks::StepPhases", "classpolicytrain_1_1callbacks_1_1StepPhases.html", "classpolicytrain_1_1callbacks_1_1StepPhases" ],
    [ "policytrain::callbacks::StepPhases::Span", "structpolicytrain_1_1callbacks_1_1StepPhases_1_1Span.html", "structpolicytrain_1_1callbacks_1_1StepPhases_1_1Span" ]
];