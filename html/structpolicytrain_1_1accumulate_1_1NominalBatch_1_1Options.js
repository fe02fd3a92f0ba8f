var structpolicytrain_1_1accumulate_1_1NominalBatch_1_1Options =
[
    [ "batch", "structpolicytrain_1_1accumulate_1_1NominalBatch_1_1Options.html#a5878bc741dbe6f5dd7012b00d482d840", null ],
    [ "nominal", "structpolicytrain_1_1accumulate_1_1NominalBatch_1_1Options.html#a2886edf58d5f937fa2b014ff582621a7", null ],
    [ "ramp_accumulate", "structpolicytrain_1_1accumulate_1_1NominalBatch_1_1Options.html#ae691084afea83946be97d9d0e52f5b6d", null ],
    [ "scale_weight_decay", "structpolicytrain_1_1accumulate_1_1NominalBatch_1_1Options.html#aeb81c784b0d0c981f6957609d1cd277b", null ],
    [ "steps", "structpolicytrain_1_1accumulate_1_1NominalBatch_1_1Options.html#a195bb3752d91d44cd492e2a8a5ce5092", null ],
    [ "warmup_batches", "structpolicytrain_1_1accumulate_1_1NominalBatch_1_1Options.html#af79e7c5e9105889bdb4764e0c3a10bc1", null ]
];