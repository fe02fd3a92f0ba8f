var autocast__guard_8hpp =
[
    [ "policytrain::precision::AutocastGuard", "classpolicytrain_1_1precision_1_1AutocastGuard.html", "classpolicytrain_1_1precision_1_1AutocastGuard" ],
    [ "autocast_supports", "autocast__guard_8hpp.html#a059359c6903c478b33671bfc51277a1d", null ],
    [ "default_autocast_dtype", "autocast__guard_8hpp.html#a876746ea00c9a04eb690079ca1cfbdd8", null ]
];