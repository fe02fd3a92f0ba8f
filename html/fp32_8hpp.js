var fp32_8hpp =
[
    [ "policytrain::NonFiniteLoss", "structpolicytrain_1_1NonFiniteLoss.html", null ],
    [ "policytrain::precision::Fp32", "structpolicytrain_1_1precision_1_1Fp32.html", "structpolicytrain_1_1precision_1_1Fp32" ],
    [ "NonFinite", "fp32_8hpp.html#a0661a7ef33270b29179943eddba1e201", [
      [ "error", "fp32_8hpp.html#a0661a7ef33270b29179943eddba1e201acb5e100e5a9a3e7f6d1fd97512215282", null ],
      [ "skip", "fp32_8hpp.html#a0661a7ef33270b29179943eddba1e201a08b43519a7e36ee4c6c5615d1663bcfd", null ],
      [ "ignore", "fp32_8hpp.html#a0661a7ef33270b29179943eddba1e201a567bc1d268f135496de3d5b946b691f3", null ],
      [ "rollback", "fp32_8hpp.html#a0661a7ef33270b29179943eddba1e201afff66e9b3d962fa319c8068b5c1997cd", null ]
    ] ]
];