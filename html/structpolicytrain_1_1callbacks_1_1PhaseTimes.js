var structpolicytrain_1_1callbacks_1_1PhaseTimes =
[
    [ "operator+=", "structpolicytrain_1_1callbacks_1_1PhaseTimes.html#a07dadf5a55a79ee73e11cc99acec59c7", null ],
    [ "total", "structpolicytrain_1_1callbacks_1_1PhaseTimes.html#a133243189be029a2f21f9f3b5e31656e", null ],
    [ "backward", "structpolicytrain_1_1callbacks_1_1PhaseTimes.html#affa06c9ff82dc3799561c1ec2bac8592", null ],
    [ "data", "structpolicytrain_1_1callbacks_1_1PhaseTimes.html#a647cee7cd5a1e8106813bc2473b194cb", null ],
    [ "forward", "structpolicytrain_1_1callbacks_1_1PhaseTimes.html#a3757ec07c0cdd6bb12d27cc0e40c9586", null ],
    [ "step", "structpolicytrain_1_1callbacks_1_1PhaseTimes.html#aa0161a93fc744ae82849cf69bb47e10b", null ]
];