var archive_8hpp =
[
    [ "policytrain::checkpoint::SaveOptions", "structpolicytrain_1_1checkpoint_1_1SaveOptions.html", "structpolicytrain_1_1checkpoint_1_1SaveOptions" ],
    [ "policytrain::checkpoint::Snapshot", "classpolicytrain_1_1checkpoint_1_1Snapshot.html", "classpolicytrain_1_1checkpoint_1_1Snapshot" ],
    [ "policytrain::checkpoint::Loaded", "structpolicytrain_1_1checkpoint_1_1Loaded.html", "structpolicytrain_1_1checkpoint_1_1Loaded" ],
    [ "load_weights", "archive_8hpp.html#a3882041e348b2afebaf9d0a5ecc48111", null ],
    [ "make_payload", "archive_8hpp.html#a9e637b748f5b43f7c3b049f2b0c4bf44", null ],
    [ "read_payload", "archive_8hpp.html#a9bda9ca7a6334d779d28b5db01b0fbac", null ]
];