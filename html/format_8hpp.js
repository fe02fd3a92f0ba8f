var format_8hpp =
[
    [ "policytrain::checkpoint::CheckpointError", "structpolicytrain_1_1checkpoint_1_1CheckpointError.html", null ],
    [ "policytrain::checkpoint::Header", "structpolicytrain_1_1checkpoint_1_1Header.html", "structpolicytrain_1_1checkpoint_1_1Header" ],
    [ "policytrain::checkpoint::RawFile", "structpolicytrain_1_1checkpoint_1_1RawFile.html", "structpolicytrain_1_1checkpoint_1_1RawFile" ],
    [ "make_header", "format_8hpp.html#ad7912941db8b0d44b258de51cd3f116b", null ],
    [ "meta_bool", "format_8hpp.html#ab6b6933827cf7fd175d4e49dafbf7269", null ],
    [ "meta_int", "format_8hpp.html#ad17daf1c142fc1615b341a2c5c6018d1", null ],
    [ "parse_file", "format_8hpp.html#ae9addab4c5af33c3cde28dd0bd1344a3", null ],
    [ "parse_header", "format_8hpp.html#a409dfccc82dc6624ab56672d6d38e6a3", null ],
    [ "read_file", "format_8hpp.html#a68fb2758aabb53787fcf25cafc69701a", null ],
    [ "read_meta", "format_8hpp.html#a987c144cd7ad858fb4722a0e416451dd", null ],
    [ "write_atomic", "format_8hpp.html#ada17bcfd22915e9c5cdc3820cf4d5641", null ],
    [ "write_file", "format_8hpp.html#a9027cd8caeeb5b3a78fdbed2d4ee6af8", null ],
    [ "kFormatVersion", "format_8hpp.html#a1850d2f4e44260326b4272a63e9cc82a", null ],
    [ "kHeaderSize", "format_8hpp.html#a01cbb181ee05671fe3b429c9da48b4fa", null ],
    [ "kMagic", "format_8hpp.html#ae7cb80b55fb2aa7d5ea9c36454be3a40", null ]
];