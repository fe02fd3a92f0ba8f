var launch_8hpp =
[
    [ "policytrain::parallel::LaunchOptions", "structpolicytrain_1_1parallel_1_1LaunchOptions.html", "structpolicytrain_1_1parallel_1_1LaunchOptions" ],
    [ "free_port", "launch_8hpp.html#a36d55a82c743566e4944f9650fb655d8", null ],
    [ "launch_local", "launch_8hpp.html#a96603e812299cab6ebfbe67bdc49b6e1", null ],
    [ "environ", "launch_8hpp.html#aa006daaf11f1e2e45a6ababaf463212b", null ]
];