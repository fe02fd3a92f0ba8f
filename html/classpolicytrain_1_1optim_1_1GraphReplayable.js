var classpolicytrain_1_1optim_1_1GraphReplayable =
[
    [ "prepare_replay", "classpolicytrain_1_1optim_1_1GraphReplayable.html#a836c6cf1bd4bce625b44e8330ca244c4", null ],
    [ "replayed", "classpolicytrain_1_1optim_1_1GraphReplayable.html#a741adbc35fb872466b2828f816da9018", null ]
];