var lr_8hpp =
[
    [ "policytrain::schedule::LrOptions", "structpolicytrain_1_1schedule_1_1LrOptions.html", "structpolicytrain_1_1schedule_1_1LrOptions" ],
    [ "policytrain::schedule::Horizon", "structpolicytrain_1_1schedule_1_1Horizon.html", "structpolicytrain_1_1schedule_1_1Horizon" ],
    [ "policytrain::schedule::OneCyclePoint", "structpolicytrain_1_1schedule_1_1OneCyclePoint.html", "structpolicytrain_1_1schedule_1_1OneCyclePoint" ],
    [ "policytrain::schedule::Lr", "classpolicytrain_1_1schedule_1_1Lr.html", "classpolicytrain_1_1schedule_1_1Lr" ],
    [ "Anneal", "lr_8hpp.html#ad5d12dbe31e58410ec53521ef4c3227e", [
      [ "cos", "lr_8hpp.html#ad5d12dbe31e58410ec53521ef4c3227ea4d00d79b6733c9cc066584a02ed03410", null ],
      [ "linear", "lr_8hpp.html#ad5d12dbe31e58410ec53521ef4c3227ea9a932b3cb396238423eb2f33ec17d6aa", null ]
    ] ],
    [ "DecayEnd", "lr_8hpp.html#a50dcc7aeca4dd749b72bf14711703642", [
      [ "last_step", "lr_8hpp.html#a50dcc7aeca4dd749b72bf14711703642ac212c19623768565770d894e772438ef", null ],
      [ "after_run", "lr_8hpp.html#a50dcc7aeca4dd749b72bf14711703642aab86f289a22c3270a43dffe4a774fd14", null ]
    ] ],
    [ "Kind", "lr_8hpp.html#aa34ab7720a7e29d254d546a79f5fa206", [
      [ "constant", "lr_8hpp.html#aa34ab7720a7e29d254d546a79f5fa206a617ac08757d38a5a7ed91c224f0e90a0", null ],
      [ "step", "lr_8hpp.html#aa34ab7720a7e29d254d546a79f5fa206a2764ca9d34e90313978d044f27ae433b", null ],
      [ "multistep", "lr_8hpp.html#aa34ab7720a7e29d254d546a79f5fa206a4971cd53401773f72dadaec0ddfd91f2", null ],
      [ "exponential", "lr_8hpp.html#aa34ab7720a7e29d254d546a79f5fa206aab3b1598e0b02155373807025b067f9a", null ],
      [ "linear", "lr_8hpp.html#aa34ab7720a7e29d254d546a79f5fa206a9a932b3cb396238423eb2f33ec17d6aa", null ],
      [ "cosine", "lr_8hpp.html#aa34ab7720a7e29d254d546a79f5fa206aa31d2f0d9cd723824073d28d35e038da", null ],
      [ "onecycle", "lr_8hpp.html#aa34ab7720a7e29d254d546a79f5fa206a912d2f3e5887497d671d12e23703f1f7", null ],
      [ "poly", "lr_8hpp.html#aa34ab7720a7e29d254d546a79f5fa206ac505a69ec179afb91b357bbbd1b0e60d", null ],
      [ "wsd", "lr_8hpp.html#aa34ab7720a7e29d254d546a79f5fa206aa02065951cc9bf77a167b500bbebb6aa", null ],
      [ "plateau", "lr_8hpp.html#aa34ab7720a7e29d254d546a79f5fa206ae66a148f11ce660effbf6ca8bc148aeb", null ]
    ] ],
    [ "ThresholdMode", "lr_8hpp.html#a564b6ab214a0b80b0bb026d6dba65ac2", [
      [ "rel", "lr_8hpp.html#a564b6ab214a0b80b0bb026d6dba65ac2a7ffc4d510260a8544e5550e62ec56bc1", null ],
      [ "abs", "lr_8hpp.html#a564b6ab214a0b80b0bb026d6dba65ac2af9ac6b05beccb0fc5837b6a7fef4c1d3", null ]
    ] ],
    [ "Unit", "lr_8hpp.html#a81a0163c6ff2cfc987f36e469793c217", [
      [ "steps", "lr_8hpp.html#a81a0163c6ff2cfc987f36e469793c217afca3ffea6534176432f58b5a22ed22e1", null ],
      [ "epochs", "lr_8hpp.html#a81a0163c6ff2cfc987f36e469793c217a36485149435d99ad961d2158345b7674", null ]
    ] ],
    [ "WarmupMode", "lr_8hpp.html#a06826186c0f78b2c2448804bd496207d", [
      [ "sequential", "lr_8hpp.html#a06826186c0f78b2c2448804bd496207da6ec7489017b25b5fff20d353b6d2162e", null ],
      [ "interpolate", "lr_8hpp.html#a06826186c0f78b2c2448804bd496207daa38db99c73ac1258e03067286e3f4e02", null ]
    ] ],
    [ "anneal", "lr_8hpp.html#aba0c3914e35ea508d42a927c5cf00153", null ],
    [ "decay_length", "lr_8hpp.html#a6c3f2f8a63bbb2357bee45ad00fe28df", null ],
    [ "kind_from_string", "lr_8hpp.html#a37ffb5ce86e0aac8cc0088a98d636fbd", null ],
    [ "lr_factor", "lr_8hpp.html#a6d64b32e2a66eb16703a7a5675d04abe", null ],
    [ "momentum_of", "lr_8hpp.html#a1471a1a413cfa70f35aa30d9471c4789", null ],
    [ "needs_total_steps", "lr_8hpp.html#ad6cb0ba11938c668afc519bff24bb67f", null ],
    [ "onecycle_at", "lr_8hpp.html#a762e0fe71f203a09d8c314b18b2e33b1", null ],
    [ "set_momentum", "lr_8hpp.html#acc260c64c71eabf196fd830b47846ee0", null ],
    [ "to_string", "lr_8hpp.html#a3b4e606fa2b960261692a0e6e6214053", null ],
    [ "unit_steps", "lr_8hpp.html#a7d9d4432d82c81ebd12d106abfe2a539", null ],
    [ "warmup_steps", "lr_8hpp.html#ada2b3c19cc7f363f68156021712aa412", null ]
];