var classpolicytrain_1_1accumulate_1_1NominalBatch =
[
    [ "Options", "structpolicytrain_1_1accumulate_1_1NominalBatch_1_1Options.html", "structpolicytrain_1_1accumulate_1_1NominalBatch_1_1Options" ],
    [ "NominalBatch", "classpolicytrain_1_1accumulate_1_1NominalBatch.html#af2d5b9a7c32b864586757f5816883f2e", null ],
    [ "accumulate", "classpolicytrain_1_1accumulate_1_1NominalBatch.html#affabc26ed1e2a94ecbe7b28fc0c7bcf7", null ],
    [ "accumulate_at", "classpolicytrain_1_1accumulate_1_1NominalBatch.html#a1603670ab6f17888c590b95e513f616d", null ],
    [ "before_step", "classpolicytrain_1_1accumulate_1_1NominalBatch.html#af4f95cab88cbbaf254793d49746cbe43", null ],
    [ "load_state_dict", "classpolicytrain_1_1accumulate_1_1NominalBatch.html#a41967b4cdde5497e4f7344def980bc7b", null ],
    [ "on_fit_begin", "classpolicytrain_1_1accumulate_1_1NominalBatch.html#a36b70cd27083b78d531baf2904a4442c", null ],
    [ "options", "classpolicytrain_1_1accumulate_1_1NominalBatch.html#a2ddfce281c8197a6c3973ddaa30e8b10", null ],
    [ "set_accumulate", "classpolicytrain_1_1accumulate_1_1NominalBatch.html#a862e08ec6c72cae1c476bccbcad40d2c", null ],
    [ "set_batch", "classpolicytrain_1_1accumulate_1_1NominalBatch.html#a7ece40aab61627dc55cc3440299aac6c", null ],
    [ "should_step", "classpolicytrain_1_1accumulate_1_1NominalBatch.html#ae4de614a7e384a379cd87171bda6f775", null ],
    [ "state_dict", "classpolicytrain_1_1accumulate_1_1NominalBatch.html#a78db0b11377631154d17fc7bc4d0837c", null ],
    [ "transform_loss", "classpolicytrain_1_1accumulate_1_1NominalBatch.html#a65d8101261e6cf389a86a213f8667bc2", null ],
    [ "weight_decay_factor", "classpolicytrain_1_1accumulate_1_1NominalBatch.html#a0941f2726e6ac8658bb8c612ef973292", null ],
    [ "world_size", "classpolicytrain_1_1accumulate_1_1NominalBatch.html#a1413ddacdf080302f17ca40bdffae077", null ],
    [ "category", "classpolicytrain_1_1accumulate_1_1NominalBatch.html#ac4ab7846ac1d358766bb9cba9a1171dd", null ],
    [ "name", "classpolicytrain_1_1accumulate_1_1NominalBatch.html#a0540bfdc75b6ffd5d4ffb496504ae563", null ]
];