var dir_5f529b73ec8428b78a8da3e159d349b0 =
[
    [ "data_parallel.hpp", "data__parallel_8hpp.html", "data__parallel_8hpp" ],
    [ "launch.hpp", "launch_8hpp.html", "launch_8hpp" ],
    [ "single.hpp", "single_8hpp.html", "single_8hpp" ]
];