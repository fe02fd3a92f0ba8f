var idx__format_8hpp =
[
    [ "policytrain::data::IdxError", "structpolicytrain_1_1data_1_1IdxError.html", null ],
    [ "policytrain::data::IdxData", "structpolicytrain_1_1data_1_1IdxData.html", "structpolicytrain_1_1data_1_1IdxData" ],
    [ "read_idx_data", "idx__format_8hpp.html#abe2a3c3f12e5f34fbb86ac32c13f5299", null ]
];