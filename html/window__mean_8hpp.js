var window__mean_8hpp =
[
    [ "nominal_accumulate", "window__mean_8hpp.html#a5b5bfd18df74fed9fbd385255ec5d33e", null ],
    [ "nominal_weight_decay_factor", "window__mean_8hpp.html#a74f52b63e8c1a7b567ebe1a86e5552a8", null ],
    [ "round_half_even", "window__mean_8hpp.html#a9d918bc03a4771ff37daf75914616092", null ],
    [ "set_weight_decay", "window__mean_8hpp.html#a3ecabc14f8e78476330adcaaeed9f207", null ],
    [ "weight_decay_of", "window__mean_8hpp.html#aacae6d82ae571a481bf0ab0034daf6b1", null ]
];