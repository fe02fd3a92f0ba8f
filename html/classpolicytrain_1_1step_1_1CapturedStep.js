var classpolicytrain_1_1step_1_1CapturedStep =
[
    [ "CapturedStep", "classpolicytrain_1_1step_1_1CapturedStep.html#ac98bd7f2fe8862da7f612f8c3f6ba88d", null ],
    [ "captures", "classpolicytrain_1_1step_1_1CapturedStep.html#a9973542078d40b24a7b9f388514a5be1", null ],
    [ "capturing", "classpolicytrain_1_1step_1_1CapturedStep.html#a9b10f3a2f813865ae0043ea5b036ee46", null ],
    [ "eager_steps", "classpolicytrain_1_1step_1_1CapturedStep.html#a6191df5dd7a59f1d1f026255025308fd", null ],
    [ "fallbacks", "classpolicytrain_1_1step_1_1CapturedStep.html#a5768fd037c24f8cc3ba086f6d3f7bdc3", null ],
    [ "keeps_grads", "classpolicytrain_1_1step_1_1CapturedStep.html#a31f38c91d306b3cd5ca6c48ad5adf595", null ],
    [ "load_state_dict", "classpolicytrain_1_1step_1_1CapturedStep.html#aa500c43c14f2c9c66e613da2f09dca06", null ],
    [ "on_fit_begin", "classpolicytrain_1_1step_1_1CapturedStep.html#a1adb9a04a5bfc75d7259df6ad63c3efd", null ],
    [ "options", "classpolicytrain_1_1step_1_1CapturedStep.html#ab9f709fa158d0bc45726169e8df3aee5", null ],
    [ "replays", "classpolicytrain_1_1step_1_1CapturedStep.html#af0dfbc064d8708537f3b3c18aac1264e", null ],
    [ "reset", "classpolicytrain_1_1step_1_1CapturedStep.html#aa8bcb3541a64dc326f2493126d3530cc", null ],
    [ "state_dict", "classpolicytrain_1_1step_1_1CapturedStep.html#a2e44e6f4665a55ffcff5e3f476cb521e", null ],
    [ "step_tensor", "classpolicytrain_1_1step_1_1CapturedStep.html#a2da2fe3c9a55cabef71cdb0684053152", null ],
    [ "name", "classpolicytrain_1_1step_1_1CapturedStep.html#a878eb20585088d9a4ba902476ed3d634", null ]
];