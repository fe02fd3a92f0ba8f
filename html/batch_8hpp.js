var batch_8hpp =
[
    [ "policytrain::Batch", "structpolicytrain_1_1Batch.html", "structpolicytrain_1_1Batch" ],
    [ "policytrain::Prediction", "structpolicytrain_1_1Prediction.html", "structpolicytrain_1_1Prediction" ]
];