var classpolicytrain_1_1memory_1_1RecomputedImpl =
[
    [ "RecomputedImpl", "classpolicytrain_1_1memory_1_1RecomputedImpl.html#a651fab90d5adbdf52bd0d85bc29c7195", null ],
    [ "forward", "classpolicytrain_1_1memory_1_1RecomputedImpl.html#aefbeccc6d35b865134698215f1279bd6", null ],
    [ "inner", "classpolicytrain_1_1memory_1_1RecomputedImpl.html#af1674340e67f7d8a6027cb0901d56a63", null ],
    [ "train", "classpolicytrain_1_1memory_1_1RecomputedImpl.html#ac7600777911260c960d5fb44477af270", null ]
];