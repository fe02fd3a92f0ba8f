var structpolicytrain_1_1checkpoint_1_1Disk_1_1Options =
[
    [ "async", "structpolicytrain_1_1checkpoint_1_1Disk_1_1Options.html#a41a9827ebb46fc651a0598c34311b8c1", null ],
    [ "best", "structpolicytrain_1_1checkpoint_1_1Disk_1_1Options.html#a750cb214781555e6fb2a34e01cdad51d", null ],
    [ "directory", "structpolicytrain_1_1checkpoint_1_1Disk_1_1Options.html#af2b84f3da8410928b99c567d8cf4306c", null ],
    [ "every_epochs", "structpolicytrain_1_1checkpoint_1_1Disk_1_1Options.html#a39f7013ea90b12bbc6f6df574b099daf", null ],
    [ "every_seconds", "structpolicytrain_1_1checkpoint_1_1Disk_1_1Options.html#ac9ec708a5195bd52a935d7d254afb5e0", null ],
    [ "every_steps", "structpolicytrain_1_1checkpoint_1_1Disk_1_1Options.html#abb1c2cb8fc02473c6cbbb9188cbc88f0", null ],
    [ "export_final", "structpolicytrain_1_1checkpoint_1_1Disk_1_1Options.html#a0627e6fb2acd63563229d5e2d3b7f30a", null ],
    [ "keep", "structpolicytrain_1_1checkpoint_1_1Disk_1_1Options.html#a2dede1ea24e1b081b5fb5644547ad934", null ],
    [ "last", "structpolicytrain_1_1checkpoint_1_1Disk_1_1Options.html#ac211f6acbb8dd852ab74c99b16739fe4", null ],
    [ "log", "structpolicytrain_1_1checkpoint_1_1Disk_1_1Options.html#a23051a0cd283c9a30ac8344c5c08d988", null ],
    [ "monitor", "structpolicytrain_1_1checkpoint_1_1Disk_1_1Options.html#a144da6489290c7076e8f5bcfe8f72133", null ],
    [ "resume", "structpolicytrain_1_1checkpoint_1_1Disk_1_1Options.html#a702af6badef8fd46b8bddefd45efbf64", null ],
    [ "run", "structpolicytrain_1_1checkpoint_1_1Disk_1_1Options.html#a26ee49bbcc24a63ad4d6231404b265aa", null ],
    [ "save", "structpolicytrain_1_1checkpoint_1_1Disk_1_1Options.html#a713a3ce103a2adcb7ba3f05b60a0d1b6", null ],
    [ "settings", "structpolicytrain_1_1checkpoint_1_1Disk_1_1Options.html#a1c49e1a025f075bfc7314e82bacf391a", null ],
    [ "top_k", "structpolicytrain_1_1checkpoint_1_1Disk_1_1Options.html#a0405123b5b38ea3b719ee3636d56750f", null ],
    [ "verbose", "structpolicytrain_1_1checkpoint_1_1Disk_1_1Options.html#ade266fbe63bb829283055a536421f8c4", null ],
    [ "weights_only", "structpolicytrain_1_1checkpoint_1_1Disk_1_1Options.html#ade2ef96c089bcf562974e8ef40e878bc", null ]
];