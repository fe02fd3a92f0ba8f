var metrics__log_8hpp =
[
    [ "policytrain::callbacks::MetricsLog", "classpolicytrain_1_1callbacks_1_1MetricsLog.html", "classpolicytrain_1_1callbacks_1_1MetricsLog" ],
    [ "policytrain::callbacks::MetricsLog::Options", "structpolicytrain_1_1callbacks_1_1MetricsLog_1_1Options.html", "structpolicytrain_1_1callbacks_1_1MetricsLog_1_1Options" ]
];