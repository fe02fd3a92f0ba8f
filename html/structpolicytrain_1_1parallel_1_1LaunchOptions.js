var structpolicytrain_1_1parallel_1_1LaunchOptions =
[
    [ "args", "structpolicytrain_1_1parallel_1_1LaunchOptions.html#ad101917cb9b23b5ba9ddb1200f0f58a3", null ],
    [ "deadline", "structpolicytrain_1_1parallel_1_1LaunchOptions.html#a427ca992e34d0c8265196c3e2fd437a8", null ],
    [ "env", "structpolicytrain_1_1parallel_1_1LaunchOptions.html#a16fcbb968adff4fbe5aa8204541a6a1d", null ],
    [ "master_addr", "structpolicytrain_1_1parallel_1_1LaunchOptions.html#a8a32430411696bd0f111108864c6169a", null ],
    [ "master_port", "structpolicytrain_1_1parallel_1_1LaunchOptions.html#a0ce9fe33213440bc65f8b26e60111b78", null ],
    [ "nproc", "structpolicytrain_1_1parallel_1_1LaunchOptions.html#a602bf401054a1c44c66db8a05a0b11cc", null ],
    [ "program", "structpolicytrain_1_1parallel_1_1LaunchOptions.html#a2acac7e4a439e37f69cb7e041813d5d5", null ],
    [ "stop_others_on_failure", "structpolicytrain_1_1parallel_1_1LaunchOptions.html#ab34c930b6fd731df7c99416dee91f811", null ]
];