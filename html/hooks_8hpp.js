var hooks_8hpp =
[
    [ "policytrain::TrainableTask", "conceptpolicytrain_1_1TrainableTask.html", null ],
    [ "policytrain::EvaluableTask", "conceptpolicytrain_1_1EvaluableTask.html", null ],
    [ "policytrain::HasFlushChecks", "conceptpolicytrain_1_1HasFlushChecks.html", null ],
    [ "policytrain::InCapturedStep", "conceptpolicytrain_1_1InCapturedStep.html", null ],
    [ "graph_safe_v", "hooks_8hpp.html#a9354c595f8b9ff3474abadcda3c00eda", null ]
];