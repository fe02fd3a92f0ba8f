var dir_a8ee8fb2336566c4ef99c4078bea60b1 =
[
    [ "batch.hpp", "batch_8hpp.html", "batch_8hpp" ],
    [ "category.hpp", "category_8hpp.html", "category_8hpp" ],
    [ "context.hpp", "context_8hpp.html", "context_8hpp" ],
    [ "hooks.hpp", "hooks_8hpp.html", "hooks_8hpp" ],
    [ "metrics.hpp", "metrics_8hpp.html", "metrics_8hpp" ],
    [ "monitor.hpp", "monitor_8hpp.html", "monitor_8hpp" ],
    [ "parameters.hpp", "parameters_8hpp.html", "parameters_8hpp" ],
    [ "state.hpp", "state_8hpp.html", "state_8hpp" ],
    [ "state_dict.hpp", "state__dict_8hpp.html", "state__dict_8hpp" ]
];