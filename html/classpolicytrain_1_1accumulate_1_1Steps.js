var classpolicytrain_1_1accumulate_1_1Steps =
[
    [ "Steps", "classpolicytrain_1_1accumulate_1_1Steps.html#acbfb7cb8e5f88372c6f957d169f370aa", null ],
    [ "accumulate", "classpolicytrain_1_1accumulate_1_1Steps.html#ab5a1af66a055c8c5a28dca00be921f84", null ],
    [ "before_step", "classpolicytrain_1_1accumulate_1_1Steps.html#ad297e5daaa55d732da73e2510f3344e2", null ],
    [ "set_accumulate", "classpolicytrain_1_1accumulate_1_1Steps.html#ab8069fa407fb118cf12980c19e57d114", null ],
    [ "should_step", "classpolicytrain_1_1accumulate_1_1Steps.html#a472556998d8c222de88bfc0ef2781862", null ],
    [ "transform_loss", "classpolicytrain_1_1accumulate_1_1Steps.html#a0dff62f4e33721175da021c2f5ba3ca5", null ],
    [ "category", "classpolicytrain_1_1accumulate_1_1Steps.html#a6215e7885e50d8f346c94556e3e3da02", null ],
    [ "name", "classpolicytrain_1_1accumulate_1_1Steps.html#a2502ed7e6fce69f007d453d166ba49b2", null ]
];