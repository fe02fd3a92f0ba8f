var auto__batch_8hpp =
[
    [ "policytrain::accumulate::AutoBatchOptions", "structpolicytrain_1_1accumulate_1_1AutoBatchOptions.html", "structpolicytrain_1_1accumulate_1_1AutoBatchOptions" ],
    [ "policytrain::accumulate::BatchPlan", "structpolicytrain_1_1accumulate_1_1BatchPlan.html", "structpolicytrain_1_1accumulate_1_1BatchPlan" ],
    [ "policytrain::accumulate::Probe", "structpolicytrain_1_1accumulate_1_1Probe.html", "structpolicytrain_1_1accumulate_1_1Probe" ],
    [ "policytrain::accumulate::AutoBatch", "classpolicytrain_1_1accumulate_1_1AutoBatch.html", "classpolicytrain_1_1accumulate_1_1AutoBatch" ],
    [ "apply_plan", "auto__batch_8hpp.html#a557a6199b67900102a961fed4685cd39", null ],
    [ "cuda_memory_budget", "auto__batch_8hpp.html#ac30d39dbdb91d6985a4a90ca6a00009d", null ],
    [ "cuda_peak_bytes", "auto__batch_8hpp.html#a022f3edd7caa7a2c07cf639c64e75006", null ],
    [ "fit_auto_batch", "auto__batch_8hpp.html#aea2dd0faa65cbe16e2dd6d7996a503ba", null ]
];