var single_8hpp =
[
    [ "policytrain::parallel::Single", "structpolicytrain_1_1parallel_1_1Single.html", "structpolicytrain_1_1parallel_1_1Single" ]
];