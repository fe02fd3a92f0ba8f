var parameters_8hpp =
[
    [ "unique_named_buffers", "parameters_8hpp.html#a6eea11db31445346169ad0e02850737c", null ],
    [ "unique_named_parameters", "parameters_8hpp.html#a970d0b2535010a85e8ef8ca312541692", null ],
    [ "unique_parameters", "parameters_8hpp.html#ae1a431b1f7b3b68d07d75c718bccb67e", null ],
    [ "unique_tensors", "parameters_8hpp.html#a83a3dd89b21cfc37f49d2e1e3a02971f", null ]
];