var structpolicytrain_1_1callbacks_1_1ProgressBar_1_1Options =
[
    [ "every", "structpolicytrain_1_1callbacks_1_1ProgressBar_1_1Options.html#aaef5d56378da3478fa56ab31b6c7357b", null ],
    [ "force_tty", "structpolicytrain_1_1callbacks_1_1ProgressBar_1_1Options.html#a9966099db8e97d748eb11e0edf49a19d", null ],
    [ "out", "structpolicytrain_1_1callbacks_1_1ProgressBar_1_1Options.html#a1d941433f991d13ee7e216575ba67ec2", null ],
    [ "refresh_hz", "structpolicytrain_1_1callbacks_1_1ProgressBar_1_1Options.html#ab97edda67c58c7ae807829bfe9153252", null ]
];