var structpolicytrain_1_1Prediction =
[
    [ "loss", "structpolicytrain_1_1Prediction.html#a07d1ca14cda448f068c71034447213f7", null ],
    [ "output", "structpolicytrain_1_1Prediction.html#a1ddb42a6bc88c73ba208bb0f7498e89f", null ]
];