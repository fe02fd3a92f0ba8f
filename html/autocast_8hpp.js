var autocast_8hpp =
[
    [ "policytrain::precision::Autocast", "classpolicytrain_1_1precision_1_1Autocast.html", "classpolicytrain_1_1precision_1_1Autocast" ],
    [ "policytrain::precision::Autocast::Options", "structpolicytrain_1_1precision_1_1Autocast_1_1Options.html", "structpolicytrain_1_1precision_1_1Autocast_1_1Options" ],
    [ "LossScaling", "autocast_8hpp.html#a050ac1687561d6d6bc567cb5b57f5935", [
      [ "automatic", "autocast_8hpp.html#a050ac1687561d6d6bc567cb5b57f5935a2bd9c0ed00116be1258e0cc66617d7c8", null ],
      [ "on", "autocast_8hpp.html#a050ac1687561d6d6bc567cb5b57f5935aed2b5c0139cec8ad2873829dc1117d50", null ],
      [ "off", "autocast_8hpp.html#a050ac1687561d6d6bc567cb5b57f5935a3262d48df5d75e3452f0f16b313b7808", null ]
    ] ],
    [ "to_string", "autocast_8hpp.html#a25c1af8b4529d31424a1fd1a3a5b7c31", null ]
];