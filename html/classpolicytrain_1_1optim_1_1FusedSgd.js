var classpolicytrain_1_1optim_1_1FusedSgd =
[
    [ "prepare_replay", "classpolicytrain_1_1optim_1_1FusedSgd.html#a1ee2e8dc526bc3dd0dbb5c301ff4b060", null ],
    [ "replayed", "classpolicytrain_1_1optim_1_1FusedSgd.html#a266d467e3fbb2c5751e8455527f49aaf", null ],
    [ "step", "classpolicytrain_1_1optim_1_1FusedSgd.html#a6ff3fb56dd14fcf80b79c11b2d28a458", null ]
];