var cuda__graph_8hpp =
[
    [ "policytrain::step::GraphOptions", "structpolicytrain_1_1step_1_1GraphOptions.html", "structpolicytrain_1_1step_1_1GraphOptions" ],
    [ "policytrain::step::CapturedStep< Backend >", "classpolicytrain_1_1step_1_1CapturedStep.html", "classpolicytrain_1_1step_1_1CapturedStep" ],
    [ "CudaGraph", "cuda__graph_8hpp.html#ad2847fa57e2a6ef898b75cf26bf0b759", null ],
    [ "GraphEmulation", "cuda__graph_8hpp.html#ad09884432ddbb35b547cf1593a88b485", null ]
];