var structpolicytrain_1_1parallel_1_1Environment =
[
    [ "from_env", "structpolicytrain_1_1parallel_1_1Environment.html#a4baea8c495bc0eea0117dcc3be38ec34", null ],
    [ "agent_store", "structpolicytrain_1_1parallel_1_1Environment.html#ad168cc8f070896920276281e9b7842d8", null ],
    [ "local_rank", "structpolicytrain_1_1parallel_1_1Environment.html#a475b1f023094317d7956127edd66873e", null ],
    [ "master_addr", "structpolicytrain_1_1parallel_1_1Environment.html#a0f918e371c4871f8dc4a32afe6e7ecd8", null ],
    [ "master_port", "structpolicytrain_1_1parallel_1_1Environment.html#a82278533d94257c909d6e192b13fd168", null ],
    [ "rank", "structpolicytrain_1_1parallel_1_1Environment.html#ade3f7c3b53d19fd8a9001f2c22b17c7f", null ],
    [ "restart_count", "structpolicytrain_1_1parallel_1_1Environment.html#ac403182fd6b930002dcd73daa431e260", null ],
    [ "world_size", "structpolicytrain_1_1parallel_1_1Environment.html#a90280ad2b6e3af38413f3d0ad4a3bd3b", null ]
];