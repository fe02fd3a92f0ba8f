var structpolicytrain_1_1data_1_1IdxData =
[
    [ "bytes", "structpolicytrain_1_1data_1_1IdxData.html#a6c8fca5b3045035aa9e37276caebd744", null ],
    [ "element_size", "structpolicytrain_1_1data_1_1IdxData.html#a17df50befc924eb11a6b14dde9488a5e", null ],
    [ "shape", "structpolicytrain_1_1data_1_1IdxData.html#ab31544434f9ae62a36b63d0a2efa1732", null ],
    [ "type", "structpolicytrain_1_1data_1_1IdxData.html#ae076c8ea11d89fd951d3d4168db526b7", null ]
];