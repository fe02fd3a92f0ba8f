var classpolicytrain_1_1callbacks_1_1Profiler =
[
    [ "Options", "structpolicytrain_1_1callbacks_1_1Profiler_1_1Options.html", "structpolicytrain_1_1callbacks_1_1Profiler_1_1Options" ],
    [ "Action", "classpolicytrain_1_1callbacks_1_1Profiler.html#adeb2594543dcbfd3cb223f393cc9abfb", [
      [ "none", "classpolicytrain_1_1callbacks_1_1Profiler.html#adeb2594543dcbfd3cb223f393cc9abfba334c4a4c42fdb79d7ebc3e73b517e6f8", null ],
      [ "warmup", "classpolicytrain_1_1callbacks_1_1Profiler.html#adeb2594543dcbfd3cb223f393cc9abfba468bfe2bd0d39a960b0fafb3d1e389ee", null ],
      [ "record", "classpolicytrain_1_1callbacks_1_1Profiler.html#adeb2594543dcbfd3cb223f393cc9abfbade17f0f24b49f8364187891f8550ffbb", null ],
      [ "record_and_save", "classpolicytrain_1_1callbacks_1_1Profiler.html#adeb2594543dcbfd3cb223f393cc9abfbaf33ab42f1dbb839f4ec9d3fb05f20142", null ]
    ] ],
    [ "Profiler", "classpolicytrain_1_1callbacks_1_1Profiler.html#a300d79442bcbb79429058e45fc2c8a5d", null ],
    [ "Profiler", "classpolicytrain_1_1callbacks_1_1Profiler.html#af46c1842fd01f0e4cf56411a9648dbcb", null ],
    [ "~Profiler", "classpolicytrain_1_1callbacks_1_1Profiler.html#a33fcb94501c03b4e90a9a6e74a2e3167", null ],
    [ "action", "classpolicytrain_1_1callbacks_1_1Profiler.html#afc3a3755b6bcf8dd44af95760d7e8327", null ],
    [ "advice", "classpolicytrain_1_1callbacks_1_1Profiler.html#a3f0b1cba870138637aae674468701337", null ],
    [ "after_step", "classpolicytrain_1_1callbacks_1_1Profiler.html#a092ea1a1224376d1b8f701c9e957f940", null ],
    [ "around_backward", "classpolicytrain_1_1callbacks_1_1Profiler.html#a3af166cd993d2a50139eb2a48c7c7158", null ],
    [ "around_forward", "classpolicytrain_1_1callbacks_1_1Profiler.html#a27dcabdb927e62e2df87425fcab6dc59", null ],
    [ "describe", "classpolicytrain_1_1callbacks_1_1Profiler.html#a0d9b9ef928a1b6b47687748f40f6ab2f", null ],
    [ "enabled", "classpolicytrain_1_1callbacks_1_1Profiler.html#a07097b04b6f479646d405ab780cbf2f5", null ],
    [ "key_averages", "classpolicytrain_1_1callbacks_1_1Profiler.html#a0577fc477490c505c611f16e1528e25f", null ],
    [ "key_averages_json", "classpolicytrain_1_1callbacks_1_1Profiler.html#a3b4c2aaa7fef59825cca0dbe05a8e154", null ],
    [ "key_averages_table", "classpolicytrain_1_1callbacks_1_1Profiler.html#ad09fc0bb1d54230eb8b164cf52fe08f2", null ],
    [ "on_epoch_begin", "classpolicytrain_1_1callbacks_1_1Profiler.html#a422f607c11f1fd8abaec99ce98080480", null ],
    [ "on_fit_begin", "classpolicytrain_1_1callbacks_1_1Profiler.html#ad95fb4f0c559065779d75c7b4aa74abe", null ],
    [ "on_fit_end", "classpolicytrain_1_1callbacks_1_1Profiler.html#a627c5649908aa181e7a93c3512670356", null ],
    [ "operator=", "classpolicytrain_1_1callbacks_1_1Profiler.html#af22daa2e8fe91b033e045157cbab0541", null ],
    [ "trace_path", "classpolicytrain_1_1callbacks_1_1Profiler.html#a793482a625db03ce01bb300a1f050882", null ],
    [ "window_open", "classpolicytrain_1_1callbacks_1_1Profiler.html#a2ab4b0c3d21f6d918e604f8e7f985b5e", null ],
    [ "name", "classpolicytrain_1_1callbacks_1_1Profiler.html#a903889b7d69776fde96d5001c86ba432", null ]
];