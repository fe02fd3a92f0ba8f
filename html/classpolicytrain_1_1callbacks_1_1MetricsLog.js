var classpolicytrain_1_1callbacks_1_1MetricsLog =
[
    [ "Options", "structpolicytrain_1_1callbacks_1_1MetricsLog_1_1Options.html", "structpolicytrain_1_1callbacks_1_1MetricsLog_1_1Options" ],
    [ "MetricsLog", "classpolicytrain_1_1callbacks_1_1MetricsLog.html#ab8c760e0a0ed090889938329483884db", null ],
    [ "after_step", "classpolicytrain_1_1callbacks_1_1MetricsLog.html#ae12c4d23085bf8bf141153be87e8c527", null ],
    [ "around_backward", "classpolicytrain_1_1callbacks_1_1MetricsLog.html#a04d26bd70ec43d217c16e18ea966ce31", null ],
    [ "around_forward", "classpolicytrain_1_1callbacks_1_1MetricsLog.html#a17fa956ed2697ed1286767dc5b6edc65", null ],
    [ "before_step", "classpolicytrain_1_1callbacks_1_1MetricsLog.html#a2ae424e88066926177590fc717dd561f", null ],
    [ "data_wait_fraction", "classpolicytrain_1_1callbacks_1_1MetricsLog.html#a6c2cafbfc69060c6f880dab4e11caba8", null ],
    [ "on_epoch_begin", "classpolicytrain_1_1callbacks_1_1MetricsLog.html#ac6ff98deaae3069f3a4ba7049f7feb4b", null ],
    [ "on_epoch_end", "classpolicytrain_1_1callbacks_1_1MetricsLog.html#a8b9149f126909a7718cbab8769c3b04d", null ],
    [ "on_fit_begin", "classpolicytrain_1_1callbacks_1_1MetricsLog.html#a2e9d35c95ab25a35ba632f2a5945e7ec", null ],
    [ "on_fit_end", "classpolicytrain_1_1callbacks_1_1MetricsLog.html#a836ab30c6cbbc59370092ccb4fd3aee4", null ],
    [ "on_validation_end", "classpolicytrain_1_1callbacks_1_1MetricsLog.html#a35abc668d81ce08e2adf414b1d248a27", null ],
    [ "peak_memory", "classpolicytrain_1_1callbacks_1_1MetricsLog.html#a1f65bdcd370d14398c478b17aaf88150", null ],
    [ "summary", "classpolicytrain_1_1callbacks_1_1MetricsLog.html#a691fccef9e8a33abee80926e5928568e", null ],
    [ "summary_text", "classpolicytrain_1_1callbacks_1_1MetricsLog.html#aac3a248268828617b437c7daf4afc9a9", null ],
    [ "totals", "classpolicytrain_1_1callbacks_1_1MetricsLog.html#a06b7fbbc5262c786a4e60cc98ed981b2", null ],
    [ "name", "classpolicytrain_1_1callbacks_1_1MetricsLog.html#a1c9253e50812681a69322d9d9c0801ba", null ]
];