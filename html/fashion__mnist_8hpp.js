var fashion__mnist_8hpp =
[
    [ "policytrain::data::TensorPair", "structpolicytrain_1_1data_1_1TensorPair.html", "structpolicytrain_1_1data_1_1TensorPair" ],
    [ "default_fashion_mnist_dir", "fashion__mnist_8hpp.html#a5fe17b0e36fe390854cd2893b1e01019", null ],
    [ "fashion_mnist_labels", "fashion__mnist_8hpp.html#ae354987acda557174bef6ce9a0683372", null ],
    [ "load_fashion_mnist", "fashion__mnist_8hpp.html#a458799a0bf5bca0403192e433bbb6da3", null ],
    [ "kFashionMnistMean", "fashion__mnist_8hpp.html#a25825d79355d1530fa34cf0b46c2825b", null ],
    [ "kFashionMnistStd", "fashion__mnist_8hpp.html#a5e1c44d3f1e8ffb62ee3464596b89616", null ]
];