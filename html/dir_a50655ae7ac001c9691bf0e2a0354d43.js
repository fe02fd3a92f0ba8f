var dir_a50655ae7ac001c9691bf0e2a0354d43 =
[
    [ "fused_adam.hpp", "fused__adam_8hpp.html", "fused__adam_8hpp" ],
    [ "fused_adamw.hpp", "fused__adamw_8hpp.html", "fused__adamw_8hpp" ],
    [ "fused_common.hpp", "fused__common_8hpp.html", "fused__common_8hpp" ],
    [ "fused_sgd.hpp", "fused__sgd_8hpp.html", "fused__sgd_8hpp" ]
];