var classpolicytrain_1_1schedule_1_1Lr =
[
    [ "Lr", "classpolicytrain_1_1schedule_1_1Lr.html#aa50f291ef78165473b4be525547b848c", null ],
    [ "after_step", "classpolicytrain_1_1schedule_1_1Lr.html#a8c55c25fb1177911bee964fb4a84d5a4", null ],
    [ "horizon", "classpolicytrain_1_1schedule_1_1Lr.html#a3940ed308de0ab59fc72928df3f6edc9", null ],
    [ "load_state_dict", "classpolicytrain_1_1schedule_1_1Lr.html#ad0ee7ed731dd7b5aebf257cd6cc8c8d7", null ],
    [ "lr_at", "classpolicytrain_1_1schedule_1_1Lr.html#a7c5a6c8b89d78820fb19adfe5c87d943", null ],
    [ "lr_scale", "classpolicytrain_1_1schedule_1_1Lr.html#a7ac868219e183d1964da108d444a2558", null ],
    [ "momentum_at", "classpolicytrain_1_1schedule_1_1Lr.html#af6c134b1c721bca7b3ab0b95d70f2959", null ],
    [ "on_epoch_begin", "classpolicytrain_1_1schedule_1_1Lr.html#a8aea746c25f2a1b61110ab49dd1d8965", null ],
    [ "on_fit_begin", "classpolicytrain_1_1schedule_1_1Lr.html#a8f0897f7042f317adf0ebeeb9fb39123", null ],
    [ "on_validation_end", "classpolicytrain_1_1schedule_1_1Lr.html#a0f978748db4a0801b8b1b0f469013717", null ],
    [ "options", "classpolicytrain_1_1schedule_1_1Lr.html#a3a470921c06b7af52706311d0883d21f", null ],
    [ "plateau_factor", "classpolicytrain_1_1schedule_1_1Lr.html#a121e19bfb4387f3d60077f6548ee931b", null ],
    [ "scale_lr", "classpolicytrain_1_1schedule_1_1Lr.html#a65c53fc302d94d2ad9a9d78f7b78456c", null ],
    [ "state_dict", "classpolicytrain_1_1schedule_1_1Lr.html#aede0b6fdc43f61873620a8c60a97d54d", null ],
    [ "step", "classpolicytrain_1_1schedule_1_1Lr.html#af08ab096e45c30f8aadbf2fb12136643", null ],
    [ "category", "classpolicytrain_1_1schedule_1_1Lr.html#a0f676e87332c86c7715fb473a23a43b5", null ],
    [ "name", "classpolicytrain_1_1schedule_1_1Lr.html#a6df418e347ca940bdfb08e491aafa457", null ]
];