var monitor_8hpp =
[
    [ "policytrain::Monitor", "structpolicytrain_1_1Monitor.html", "structpolicytrain_1_1Monitor" ],
    [ "Mode", "monitor_8hpp.html#a15b094ad555763974066e57bc2ded5cc", [
      [ "min", "monitor_8hpp.html#a15b094ad555763974066e57bc2ded5ccad8bd79cc131920d5de426f914d17405a", null ],
      [ "max", "monitor_8hpp.html#a15b094ad555763974066e57bc2ded5cca2ffe4e77325d9a7152f7086ea7aa5114", null ]
    ] ],
    [ "parse_mode", "monitor_8hpp.html#a6abf4d508b16a4a09897525c93c19135", null ],
    [ "to_string", "monitor_8hpp.html#aa21b569b0cab5b85b5980ea01cb33451", null ]
];