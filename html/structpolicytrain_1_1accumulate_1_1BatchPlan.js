var structpolicytrain_1_1accumulate_1_1BatchPlan =
[
    [ "global_batch", "structpolicytrain_1_1accumulate_1_1BatchPlan.html#aa3d0865012533cdf53a0e43e16ff8c68", null ],
    [ "operator==", "structpolicytrain_1_1accumulate_1_1BatchPlan.html#acdc95c6350ec97d8e56f23d73241e589", null ],
    [ "accumulate", "structpolicytrain_1_1accumulate_1_1BatchPlan.html#aba36e0ed125e1e088bd938b592e85df4", null ],
    [ "micro_batch", "structpolicytrain_1_1accumulate_1_1BatchPlan.html#af7db4adddad7771c68329d078f3d7c5b", null ]
];