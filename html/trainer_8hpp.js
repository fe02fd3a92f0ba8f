var trainer_8hpp =
[
    [ "policytrain::Trainer< Task, Policies >", "classpolicytrain_1_1Trainer.html", "classpolicytrain_1_1Trainer" ],
    [ "Trainer", "trainer_8hpp.html#a59b837df107fa8514865ffc2d773a45a", null ]
];