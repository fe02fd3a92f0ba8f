var dir_7010c9f9cf7045f173f51c0e6ac11f58 =
[
    [ "constant.hpp", "constant_8hpp.html", "constant_8hpp" ],
    [ "lr.hpp", "lr_8hpp.html", "lr_8hpp" ]
];