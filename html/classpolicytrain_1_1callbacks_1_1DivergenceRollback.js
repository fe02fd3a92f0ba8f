var classpolicytrain_1_1callbacks_1_1DivergenceRollback =
[
    [ "Options", "structpolicytrain_1_1callbacks_1_1DivergenceRollback_1_1Options.html", "structpolicytrain_1_1callbacks_1_1DivergenceRollback_1_1Options" ],
    [ "DivergenceRollback", "classpolicytrain_1_1callbacks_1_1DivergenceRollback.html#a5c3d26000e91b4fa903e9712e6045ac1", null ],
    [ "after_step", "classpolicytrain_1_1callbacks_1_1DivergenceRollback.html#a7e71d5833f83ee5702cde8e688f82a4e", null ],
    [ "load_state_dict", "classpolicytrain_1_1callbacks_1_1DivergenceRollback.html#aace04a3ce1927f29d55ce456adb78551", null ],
    [ "on_fit_begin", "classpolicytrain_1_1callbacks_1_1DivergenceRollback.html#aa70521f9f7cd7795a24cda5c3c6c7280", null ],
    [ "rollbacks", "classpolicytrain_1_1callbacks_1_1DivergenceRollback.html#a9d35e1770f479832de8d3dc2b3775430", null ],
    [ "snapshot_step", "classpolicytrain_1_1callbacks_1_1DivergenceRollback.html#ac3d61401ff4dfc98e7977e760d03fdcb", null ],
    [ "state_dict", "classpolicytrain_1_1callbacks_1_1DivergenceRollback.html#a2c0e1da7b99338d63d55bac3c212c759", null ],
    [ "name", "classpolicytrain_1_1callbacks_1_1DivergenceRollback.html#a3683278d779d9358fb0cb5de2e6ccb6d", null ]
];