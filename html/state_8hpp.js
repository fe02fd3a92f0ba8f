var state_8hpp =
[
    [ "policytrain::TrainState", "structpolicytrain_1_1TrainState.html", "structpolicytrain_1_1TrainState" ]
];