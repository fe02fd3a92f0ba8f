var nominal__batch_8hpp =
[
    [ "policytrain::accumulate::NominalBatch", "classpolicytrain_1_1accumulate_1_1NominalBatch.html", "classpolicytrain_1_1accumulate_1_1NominalBatch" ],
    [ "policytrain::accumulate::NominalBatch::Options", "structpolicytrain_1_1accumulate_1_1NominalBatch_1_1Options.html", "structpolicytrain_1_1accumulate_1_1NominalBatch_1_1Options" ]
];