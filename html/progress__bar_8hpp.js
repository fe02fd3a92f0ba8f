var progress__bar_8hpp =
[
    [ "policytrain::callbacks::ProgressBar", "classpolicytrain_1_1callbacks_1_1ProgressBar.html", "classpolicytrain_1_1callbacks_1_1ProgressBar" ],
    [ "policytrain::callbacks::ProgressBar::Options", "structpolicytrain_1_1callbacks_1_1ProgressBar_1_1Options.html", "structpolicytrain_1_1callbacks_1_1ProgressBar_1_1Options" ]
];