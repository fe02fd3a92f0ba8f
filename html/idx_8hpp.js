var idx_8hpp =
[
    [ "policytrain::data::ImageLabels", "structpolicytrain_1_1data_1_1ImageLabels.html", "structpolicytrain_1_1data_1_1ImageLabels" ],
    [ "read_idx", "idx_8hpp.html#ad821bbca07c31ea6f8ef41d9229584b5", null ],
    [ "read_idx_pair", "idx_8hpp.html#ab262bb855d6ec3ce5f60500c0284676a", null ]
];