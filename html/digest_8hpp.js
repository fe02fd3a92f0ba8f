var digest_8hpp =
[
    [ "params_sha256", "digest_8hpp.html#a96d25f54fa73ac579dcd5a2bdc2b2504", null ]
];