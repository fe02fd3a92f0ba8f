var structpolicytrain_1_1checkpoint_1_1Candidates =
[
    [ "readable", "structpolicytrain_1_1checkpoint_1_1Candidates.html#a7717af16d14e0a1cbe603ce76ecc9155", null ],
    [ "unreadable", "structpolicytrain_1_1checkpoint_1_1Candidates.html#af72c69786fc56cf07ff2c093248790ea", null ]
];