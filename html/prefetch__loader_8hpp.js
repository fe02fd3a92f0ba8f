var prefetch__loader_8hpp =
[
    [ "policytrain::data::AugmentOptions", "structpolicytrain_1_1data_1_1AugmentOptions.html", "structpolicytrain_1_1data_1_1AugmentOptions" ],
    [ "policytrain::data::NormalizeOptions", "structpolicytrain_1_1data_1_1NormalizeOptions.html", "structpolicytrain_1_1data_1_1NormalizeOptions" ],
    [ "policytrain::data::PrefetchOptions", "structpolicytrain_1_1data_1_1PrefetchOptions.html", "structpolicytrain_1_1data_1_1PrefetchOptions" ],
    [ "policytrain::data::PrefetchLoader", "classpolicytrain_1_1data_1_1PrefetchLoader.html", "classpolicytrain_1_1data_1_1PrefetchLoader" ],
    [ "policytrain::data::PrefetchLoader::iterator", "classpolicytrain_1_1data_1_1PrefetchLoader_1_1iterator.html", "classpolicytrain_1_1data_1_1PrefetchLoader_1_1iterator" ],
    [ "assemble_batch", "prefetch__loader_8hpp.html#a434f41be9246cccaa37aee927f6f11c6", null ]
];