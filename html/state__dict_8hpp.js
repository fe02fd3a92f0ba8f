var state__dict_8hpp =
[
    [ "policytrain::Stateful", "conceptpolicytrain_1_1Stateful.html", null ],
    [ "StateDict", "state__dict_8hpp.html#a7eeacb345ec7678e57e998c5afcab368", null ],
    [ "scalar_tensor", "state__dict_8hpp.html#ac439b0aaeee90c5adce088aeb9565a6e", null ],
    [ "scalar_tensor", "state__dict_8hpp.html#ac3ea6ae1986b6072b3e03e5ac31ed947", null ],
    [ "scalar_tensor", "state__dict_8hpp.html#ab2690e8a17348ff205fbd1a20b998680", null ],
    [ "state_at", "state__dict_8hpp.html#af127796a2d6629007360d0f666dfaa18", null ],
    [ "state_double", "state__dict_8hpp.html#add6bcaba3bb90d5b7c2652b34288516b", null ],
    [ "state_int", "state__dict_8hpp.html#abf09c3eb76c319bb8533c93edefc9a8a", null ],
    [ "sub_state", "state__dict_8hpp.html#ab1cec950973430c76cf6249474346228", null ]
];