var structpolicytrain_1_1precision_1_1Fp32 =
[
    [ "Fp32", "structpolicytrain_1_1precision_1_1Fp32.html#af68abb8bcb5a0ab458aab6bead0f26b7", null ],
    [ "Fp32", "structpolicytrain_1_1precision_1_1Fp32.html#ac9419b8cbff14d7fef5a9631b38e59f2", null ],
    [ "discard_step", "structpolicytrain_1_1precision_1_1Fp32.html#ae2be6f37a0773b2931ce25f06f981125", null ],
    [ "flush_checks", "structpolicytrain_1_1precision_1_1Fp32.html#a9ac5c265f3c108c4e373ae0cc0481d77", null ],
    [ "graph_refusal", "structpolicytrain_1_1precision_1_1Fp32.html#a0c6259349162ac345442d75de72531f2", null ],
    [ "on_epoch_end", "structpolicytrain_1_1precision_1_1Fp32.html#ad5545e14bd453248374145ecfc8a7bbf", null ],
    [ "on_fit_end", "structpolicytrain_1_1precision_1_1Fp32.html#a71d67767d1c70cddc05905a004a5914b", null ],
    [ "prepare_capture", "structpolicytrain_1_1precision_1_1Fp32.html#a0506e640fbcf673a1485cd87cc81cac8", null ],
    [ "step", "structpolicytrain_1_1precision_1_1Fp32.html#a92e8ca437526e5cd90bf58bfa04e509e", null ],
    [ "transform_loss", "structpolicytrain_1_1precision_1_1Fp32.html#add6cfdd1cbb97ee73a18d6cfb518a7fe", null ],
    [ "category", "structpolicytrain_1_1precision_1_1Fp32.html#a53b78d10d2959ad39057407b6bda3766", null ],
    [ "check_every", "structpolicytrain_1_1precision_1_1Fp32.html#a1dd5933cab99353cc62d2e1465cc1b7c", null ],
    [ "graph_safe", "structpolicytrain_1_1precision_1_1Fp32.html#a399acfb636c0b4546e5eb78fe092db31", null ],
    [ "name", "structpolicytrain_1_1precision_1_1Fp32.html#ad076acd1d5eba66b29ab9f2c327f7ea0", null ],
    [ "on_nonfinite", "structpolicytrain_1_1precision_1_1Fp32.html#ad383407c2ef5ad61ac2eca0ebc40db6e", null ]
];