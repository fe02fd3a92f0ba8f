var classpolicytrain_1_1checkpoint_1_1Snapshot =
[
    [ "Snapshot", "classpolicytrain_1_1checkpoint_1_1Snapshot.html#adbdbb4e666a4c2041936530548f7f0a8", null ],
    [ "empty", "classpolicytrain_1_1checkpoint_1_1Snapshot.html#a8f9c4528799071ed5cf3785da7939fc1", null ],
    [ "restore", "classpolicytrain_1_1checkpoint_1_1Snapshot.html#ab5c9f2fe55702b7653237da6cd48ab08", null ],
    [ "state", "classpolicytrain_1_1checkpoint_1_1Snapshot.html#a77b53b049ce68ea79820538bfd5a9e59", null ]
];