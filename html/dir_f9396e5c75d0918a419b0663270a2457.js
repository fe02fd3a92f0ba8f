var dir_f9396e5c75d0918a419b0663270a2457 =
[
    [ "peak.hpp", "peak_8hpp.html", "peak_8hpp" ],
    [ "recompute.hpp", "recompute_8hpp.html", "recompute_8hpp" ]
];