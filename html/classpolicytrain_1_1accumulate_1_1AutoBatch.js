var classpolicytrain_1_1accumulate_1_1AutoBatch =
[
    [ "AutoBatch", "classpolicytrain_1_1accumulate_1_1AutoBatch.html#a75406df0cc2488242796fe0e2e37482b", null ],
    [ "halvings", "classpolicytrain_1_1accumulate_1_1AutoBatch.html#a6c46eb933d24d063373debf7bfbbf909", null ],
    [ "on_out_of_memory", "classpolicytrain_1_1accumulate_1_1AutoBatch.html#ab0ef08202559e3774a413ae14bb050ea", null ],
    [ "options", "classpolicytrain_1_1accumulate_1_1AutoBatch.html#ad4db4602202c6de918e22accf0b08a2a", null ],
    [ "plan", "classpolicytrain_1_1accumulate_1_1AutoBatch.html#a741f01be5fd0e321cd81444dc6b40f61", null ],
    [ "probes", "classpolicytrain_1_1accumulate_1_1AutoBatch.html#ab501386d9a020727bd6e1fda2ab0426d", null ],
    [ "search", "classpolicytrain_1_1accumulate_1_1AutoBatch.html#a1cdf30b6132a8e3ba0a7cdc3de6a14d9", null ]
];