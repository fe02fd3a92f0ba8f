var dir_f5112e018d83b395e92bece30e1839ef =
[
    [ "auto_batch.hpp", "auto__batch_8hpp.html", "auto__batch_8hpp" ],
    [ "nominal_batch.hpp", "nominal__batch_8hpp.html", "nominal__batch_8hpp" ],
    [ "none.hpp", "accumulation_2none_8hpp.html", "accumulation_2none_8hpp" ],
    [ "steps.hpp", "steps_8hpp.html", "steps_8hpp" ],
    [ "window_mean.hpp", "window__mean_8hpp.html", "window__mean_8hpp" ]
];