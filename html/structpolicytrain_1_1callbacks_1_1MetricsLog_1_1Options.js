var structpolicytrain_1_1callbacks_1_1MetricsLog_1_1Options =
[
    [ "dir", "structpolicytrain_1_1callbacks_1_1MetricsLog_1_1Options.html#a40e473201477053c2ce29240b4287780", null ],
    [ "every", "structpolicytrain_1_1callbacks_1_1MetricsLog_1_1Options.html#ad2e763499f61c0e23bcaea00724132fa", null ],
    [ "out", "structpolicytrain_1_1callbacks_1_1MetricsLog_1_1Options.html#ac0d7bcb25b963c4c8351f13bf2e8fa3d", null ],
    [ "print_summary", "structpolicytrain_1_1callbacks_1_1MetricsLog_1_1Options.html#a2f7f3563da2b7108bd6a2b9c92a749fd", null ]
];