var classpolicytrain_1_1data_1_1PrefetchLoader_1_1iterator =
[
    [ "difference_type", "classpolicytrain_1_1data_1_1PrefetchLoader_1_1iterator.html#ab17ce071c69f3facee45e2d8da96d337", null ],
    [ "value_type", "classpolicytrain_1_1data_1_1PrefetchLoader_1_1iterator.html#a95ffe6554d1af59f4badb87b68042c95", null ],
    [ "iterator", "classpolicytrain_1_1data_1_1PrefetchLoader_1_1iterator.html#aee566c40a607fb79113861979ed6926c", null ],
    [ "index", "classpolicytrain_1_1data_1_1PrefetchLoader_1_1iterator.html#af67d1660e7e41bafcc6528608d29b94f", null ],
    [ "operator*", "classpolicytrain_1_1data_1_1PrefetchLoader_1_1iterator.html#a6c79f89c40cd5522a6a954ee3d24c06f", null ],
    [ "operator++", "classpolicytrain_1_1data_1_1PrefetchLoader_1_1iterator.html#adcc67fc28f32f001f2704355d17643e6", null ],
    [ "operator++", "classpolicytrain_1_1data_1_1PrefetchLoader_1_1iterator.html#ae9f29ca160de05d18e205554847f4244", null ],
    [ "operator+=", "classpolicytrain_1_1data_1_1PrefetchLoader_1_1iterator.html#a22162dd82ee9be627b11298fb24961f9", null ],
    [ "operator==", "classpolicytrain_1_1data_1_1PrefetchLoader_1_1iterator.html#a7214b39b4794890283bb0704c228b733", null ]
];