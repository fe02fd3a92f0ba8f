var structpolicytrain_1_1checkpoint_1_1Header =
[
    [ "meta_crc", "structpolicytrain_1_1checkpoint_1_1Header.html#a6fabd98c3b21fd64e6785416fb568df7", null ],
    [ "meta_size", "structpolicytrain_1_1checkpoint_1_1Header.html#a492f6b9e4a9bd7bdb778d07f94989db3", null ],
    [ "payload_crc", "structpolicytrain_1_1checkpoint_1_1Header.html#a7ae4f7d390a525292d1ab581a8bb5c13", null ],
    [ "payload_size", "structpolicytrain_1_1checkpoint_1_1Header.html#a6a0dcf27036d5f956bfa7876e915fd3a", null ],
    [ "version", "structpolicytrain_1_1checkpoint_1_1Header.html#a3a992fd663940e86cce99458547078be", null ]
];