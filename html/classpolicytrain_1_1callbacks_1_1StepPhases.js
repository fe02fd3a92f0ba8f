var classpolicytrain_1_1callbacks_1_1StepPhases =
[
    [ "Span", "structpolicytrain_1_1callbacks_1_1StepPhases_1_1Span.html", "structpolicytrain_1_1callbacks_1_1StepPhases_1_1Span" ],
    [ "Clock", "classpolicytrain_1_1callbacks_1_1StepPhases.html#ad445c70406ae1eb727d6c635a6823e3d", null ],
    [ "backward", "classpolicytrain_1_1callbacks_1_1StepPhases.html#a8b3c18536239c0d02130767a2ca4915f", null ],
    [ "epoch_begin", "classpolicytrain_1_1callbacks_1_1StepPhases.html#a7c90711e108bc8d281d8aa059b3fbb66", null ],
    [ "forward", "classpolicytrain_1_1callbacks_1_1StepPhases.html#a315f28442a83672cb1fb02ca85562a8a", null ],
    [ "last_spans", "classpolicytrain_1_1callbacks_1_1StepPhases.html#aa6734930523c0ebf09007eb5ef78c64b", null ],
    [ "step_end", "classpolicytrain_1_1callbacks_1_1StepPhases.html#a4bf46a3e0ee6960bab49bd3a46d1a50a", null ]
];