var structpolicytrain_1_1FitOptions =
[
    [ "epochs", "structpolicytrain_1_1FitOptions.html#a2f860966c079ead30befcb0e8d40b24e", null ],
    [ "limit_train_batches", "structpolicytrain_1_1FitOptions.html#aed4eecbc70db97996ae205f786bf472e", null ],
    [ "limit_val_batches", "structpolicytrain_1_1FitOptions.html#a320166ce05a0096554c20a363f001329", null ],
    [ "max_steps", "structpolicytrain_1_1FitOptions.html#ac5d7899def7a66fad0a834d0791f369a", null ]
];