var structpolicytrain_1_1FitResult =
[
    [ "samples_per_second", "structpolicytrain_1_1FitResult.html#aa6d54bfdaccafb7f02cfa2dfb3c3e5d7", null ],
    [ "epochs_run", "structpolicytrain_1_1FitResult.html#ab1b3db65259c5d76e114aae6dfcc0cd6", null ],
    [ "global_steps", "structpolicytrain_1_1FitResult.html#ac43ed186084e33bad1cf76204f53b3a4", null ],
    [ "samples_seen", "structpolicytrain_1_1FitResult.html#a4b1618cd8e97f21a7cb462f89bae0975", null ],
    [ "skipped_steps", "structpolicytrain_1_1FitResult.html#aa551455f87d6b441e973e033efe35ef2", null ],
    [ "stopped_early", "structpolicytrain_1_1FitResult.html#a5448f036c7ada75e1cc949a6b9f3bc3f", null ],
    [ "train_seconds", "structpolicytrain_1_1FitResult.html#a1c9bb26279aea02cf87115e85a01eeb7", null ],
    [ "validation", "structpolicytrain_1_1FitResult.html#abaace94739c808d07f178f193d4b69e3", null ]
];