var data__parallel_8hpp =
[
    [ "policytrain::parallel::CollectiveError", "structpolicytrain_1_1parallel_1_1CollectiveError.html", null ],
    [ "policytrain::parallel::ResumeMismatch", "structpolicytrain_1_1parallel_1_1ResumeMismatch.html", null ],
    [ "policytrain::parallel::Environment", "structpolicytrain_1_1parallel_1_1Environment.html", "structpolicytrain_1_1parallel_1_1Environment" ],
    [ "policytrain::parallel::DataParallelOptions", "structpolicytrain_1_1parallel_1_1DataParallelOptions.html", "structpolicytrain_1_1parallel_1_1DataParallelOptions" ],
    [ "policytrain::parallel::DataParallel", "classpolicytrain_1_1parallel_1_1DataParallel.html", "classpolicytrain_1_1parallel_1_1DataParallel" ]
];