var loader_8hpp =
[
    [ "policytrain::data::LoaderOptions", "structpolicytrain_1_1data_1_1LoaderOptions.html", "structpolicytrain_1_1data_1_1LoaderOptions" ],
    [ "policytrain::data::TensorLoader", "classpolicytrain_1_1data_1_1TensorLoader.html", "classpolicytrain_1_1data_1_1TensorLoader" ],
    [ "policytrain::data::TensorLoader::iterator", "classpolicytrain_1_1data_1_1TensorLoader_1_1iterator.html", "classpolicytrain_1_1data_1_1TensorLoader_1_1iterator" ]
];