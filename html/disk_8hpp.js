var disk_8hpp =
[
    [ "policytrain::checkpoint::Candidates", "structpolicytrain_1_1checkpoint_1_1Candidates.html", "structpolicytrain_1_1checkpoint_1_1Candidates" ],
    [ "policytrain::checkpoint::RunInfo", "structpolicytrain_1_1checkpoint_1_1RunInfo.html", "structpolicytrain_1_1checkpoint_1_1RunInfo" ],
    [ "policytrain::checkpoint::AsyncWriter", "classpolicytrain_1_1checkpoint_1_1AsyncWriter.html", "classpolicytrain_1_1checkpoint_1_1AsyncWriter" ],
    [ "policytrain::checkpoint::Disk", "classpolicytrain_1_1checkpoint_1_1Disk.html", "classpolicytrain_1_1checkpoint_1_1Disk" ],
    [ "policytrain::checkpoint::Disk::Options", "structpolicytrain_1_1checkpoint_1_1Disk_1_1Options.html", "structpolicytrain_1_1checkpoint_1_1Disk_1_1Options" ],
    [ "fingerprint_differences", "disk_8hpp.html#a3bbf89a57e54dd67aca858e4aab74af0", null ],
    [ "list_checkpoints", "disk_8hpp.html#afbd2820991567d88f4160a728fff080c", null ],
    [ "load", "disk_8hpp.html#a3067efafff006a89f812d42558c7c5bd", null ],
    [ "run_fingerprint", "disk_8hpp.html#a820c09b9cf249f47e3a56e9a9e3a8cf0", null ],
    [ "kLibraryVersion", "disk_8hpp.html#a4278309bac62d35c8ce0d176e4e45c7a", null ]
];