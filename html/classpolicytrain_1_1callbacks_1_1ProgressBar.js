var classpolicytrain_1_1callbacks_1_1ProgressBar =
[
    [ "Options", "structpolicytrain_1_1callbacks_1_1ProgressBar_1_1Options.html", "structpolicytrain_1_1callbacks_1_1ProgressBar_1_1Options" ],
    [ "ProgressBar", "classpolicytrain_1_1callbacks_1_1ProgressBar.html#a405b903ea63578fea4191021278260e7", null ],
    [ "after_step", "classpolicytrain_1_1callbacks_1_1ProgressBar.html#a3f650a157eb4c3d04587a411e42dc163", null ],
    [ "on_epoch_begin", "classpolicytrain_1_1callbacks_1_1ProgressBar.html#accca7702ff12909c877476a541d79eaa", null ],
    [ "on_epoch_end", "classpolicytrain_1_1callbacks_1_1ProgressBar.html#ace66f19005fec8ae36a76f51966e1670", null ],
    [ "on_fit_begin", "classpolicytrain_1_1callbacks_1_1ProgressBar.html#ac0849796e0fc5f93bfb6d84c756813a7", null ],
    [ "on_validation_end", "classpolicytrain_1_1callbacks_1_1ProgressBar.html#a88f930f06a2a83ea1ff4c73a5b4e66e0", null ],
    [ "name", "classpolicytrain_1_1callbacks_1_1ProgressBar.html#aefe8bfa7b4037ff3e975fb568dba7717", null ]
];