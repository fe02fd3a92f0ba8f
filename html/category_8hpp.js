var category_8hpp =
[
    [ "Category", "category_8hpp.html#aa787812a051b59679755245716cc5343", [
      [ "callback", "category_8hpp.html#aa787812a051b59679755245716cc5343a924a8ceeac17f54d3be3f8cdf1c04eb2", null ],
      [ "parallel", "category_8hpp.html#aa787812a051b59679755245716cc5343a48920c071f6a5c97ae3739be64630697", null ],
      [ "accumulation", "category_8hpp.html#aa787812a051b59679755245716cc5343ab06211b4f3bd06586c62a423fbb37f27", null ],
      [ "precision", "category_8hpp.html#aa787812a051b59679755245716cc5343ae2794d8f12719281eff5601251c8a680", null ],
      [ "schedule", "category_8hpp.html#aa787812a051b59679755245716cc5343a799855594adc0f2bd7302c69d3234b5a", null ],
      [ "checkpoint", "category_8hpp.html#aa787812a051b59679755245716cc5343aa1af74ebd46eb956d2b09a188de3ab52", null ]
    ] ],
    [ "policy_name", "category_8hpp.html#a06fd6f20a189a868aa466698b6ad4316", null ],
    [ "to_string", "category_8hpp.html#af57b32ccb3f781883caadb850d6d7dd6", null ],
    [ "category_of", "category_8hpp.html#ae31e1485078f3b7e64256ee49b92b117", null ]
];