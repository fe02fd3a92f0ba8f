var classpolicytrain_1_1data_1_1TensorLoader_1_1iterator =
[
    [ "difference_type", "classpolicytrain_1_1data_1_1TensorLoader_1_1iterator.html#aa26bd6a998d0e83a63c8007b1de2e079", null ],
    [ "value_type", "classpolicytrain_1_1data_1_1TensorLoader_1_1iterator.html#a47f1f453096c710f466376c50d2aaeef", null ],
    [ "iterator", "classpolicytrain_1_1data_1_1TensorLoader_1_1iterator.html#a1ce84c894a961b87a2e85a63c542818e", null ],
    [ "iterator", "classpolicytrain_1_1data_1_1TensorLoader_1_1iterator.html#a99d1804c4552eabdecbea00ca033f8e9", null ],
    [ "operator*", "classpolicytrain_1_1data_1_1TensorLoader_1_1iterator.html#ac3d2a69e89f8505c15beb03eac92fac0", null ],
    [ "operator++", "classpolicytrain_1_1data_1_1TensorLoader_1_1iterator.html#ac758035bbc151677f4829c10850b2a24", null ],
    [ "operator++", "classpolicytrain_1_1data_1_1TensorLoader_1_1iterator.html#aa90664449c23042d36c7f04ce980155d", null ],
    [ "operator==", "classpolicytrain_1_1data_1_1TensorLoader_1_1iterator.html#ac56165ffe234273d24eaa37f03da2775", null ]
];