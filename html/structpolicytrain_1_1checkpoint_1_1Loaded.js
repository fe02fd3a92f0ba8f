var structpolicytrain_1_1checkpoint_1_1Loaded =
[
    [ "apply", "structpolicytrain_1_1checkpoint_1_1Loaded.html#acb349a146f4332d5e21ecb00e6945c17", null ],
    [ "file", "structpolicytrain_1_1checkpoint_1_1Loaded.html#a6e57d0c73726b1127f8131180dfb0ef2", null ],
    [ "meta", "structpolicytrain_1_1checkpoint_1_1Loaded.html#a79c95877906d6437eb74fb3b41969367", null ],
    [ "model", "structpolicytrain_1_1checkpoint_1_1Loaded.html#aa3523b993e9254c62494108d180096ae", null ],
    [ "optimizer", "structpolicytrain_1_1checkpoint_1_1Loaded.html#a3284cfd2d89f0e78d93a376c0205b701", null ],
    [ "rng_cpu", "structpolicytrain_1_1checkpoint_1_1Loaded.html#a950a2a6b6ca266ab653cdae501f29519", null ],
    [ "rng_cuda", "structpolicytrain_1_1checkpoint_1_1Loaded.html#a183b4985c7292604d8e288812b0667ae", null ],
    [ "state", "structpolicytrain_1_1checkpoint_1_1Loaded.html#af31488e78dd466f0b74fb2ff1c26122b", null ]
];