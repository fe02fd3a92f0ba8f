var structpolicytrain_1_1checkpoint_1_1RawFile =
[
    [ "payload", "structpolicytrain_1_1checkpoint_1_1RawFile.html#a9ec8c7a7b6312ee427f7fdfadb2df1b4", null ],
    [ "bytes", "structpolicytrain_1_1checkpoint_1_1RawFile.html#ae2baaae2e5748d97c2154a9de267b7b3", null ],
    [ "meta", "structpolicytrain_1_1checkpoint_1_1RawFile.html#a1c3c5ce47eb1fcb1bbe5ee0743bed859", null ],
    [ "payload_offset", "structpolicytrain_1_1checkpoint_1_1RawFile.html#a65d0b58fcae5075a14f8f6ec50bac667", null ]
];