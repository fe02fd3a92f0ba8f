var divergence__rollback_8hpp =
[
    [ "policytrain::callbacks::DivergenceError", "structpolicytrain_1_1callbacks_1_1DivergenceError.html", null ],
    [ "policytrain::callbacks::DivergenceRollback", "classpolicytrain_1_1callbacks_1_1DivergenceRollback.html", "classpolicytrain_1_1callbacks_1_1DivergenceRollback" ],
    [ "policytrain::callbacks::DivergenceRollback::Options", "structpolicytrain_1_1callbacks_1_1DivergenceRollback_1_1Options.html", "structpolicytrain_1_1callbacks_1_1DivergenceRollback_1_1Options" ]
];