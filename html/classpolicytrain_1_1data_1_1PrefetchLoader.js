var classpolicytrain_1_1data_1_1PrefetchLoader =
[
    [ "iterator", "classpolicytrain_1_1data_1_1PrefetchLoader_1_1iterator.html", "classpolicytrain_1_1data_1_1PrefetchLoader_1_1iterator" ],
    [ "PrefetchLoader", "classpolicytrain_1_1data_1_1PrefetchLoader.html#a77c762bd678863ad2054f016d7a784df", null ],
    [ "assemble", "classpolicytrain_1_1data_1_1PrefetchLoader.html#a7a30a4e7253035686b3fd0821fe5a55f", null ],
    [ "assembled", "classpolicytrain_1_1data_1_1PrefetchLoader.html#adae9fa897e8fd68014bf843aa8e8859a", null ],
    [ "begin", "classpolicytrain_1_1data_1_1PrefetchLoader.html#affcf2ab5b10169ac44b22b8b9235f3c0", null ],
    [ "end", "classpolicytrain_1_1data_1_1PrefetchLoader.html#ac2823b8725720692f5cbeb6551d39032", null ],
    [ "epoch", "classpolicytrain_1_1data_1_1PrefetchLoader.html#a10f238282cf893b9f5cb99b605b1f5d1", null ],
    [ "num_samples", "classpolicytrain_1_1data_1_1PrefetchLoader.html#ae729335625b5c459210f53e5d7c346be", null ],
    [ "options", "classpolicytrain_1_1data_1_1PrefetchLoader.html#a29cf1effc63559310ab9e9db8e5568c5", null ],
    [ "order", "classpolicytrain_1_1data_1_1PrefetchLoader.html#a0c0058c28911ae0cddfc6729a2b9d6f6", null ],
    [ "padding", "classpolicytrain_1_1data_1_1PrefetchLoader.html#a7f84fccb747d96291d36088ee97c95c3", null ],
    [ "prefetch_options", "classpolicytrain_1_1data_1_1PrefetchLoader.html#acb93afe89b28ba308716d5df12e3cdde", null ],
    [ "set_epoch", "classpolicytrain_1_1data_1_1PrefetchLoader.html#ac94b3d8b49115501428499b33633253e", null ],
    [ "size", "classpolicytrain_1_1data_1_1PrefetchLoader.html#a996d27e539305bc1843005db801811a1", null ],
    [ "threads_started", "classpolicytrain_1_1data_1_1PrefetchLoader.html#af1ae14da09db05539f625069ef58f231", null ]
];