var dir_609598a8545e3f7208839bdac3a3e8ac =
[
    [ "cuda_graph.hpp", "cuda__graph_8hpp.html", "cuda__graph_8hpp" ]
];