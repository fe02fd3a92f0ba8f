var context_8hpp =
[
    [ "policytrain::FitOptions", "structpolicytrain_1_1FitOptions.html", "structpolicytrain_1_1FitOptions" ],
    [ "policytrain::FitResult", "structpolicytrain_1_1FitResult.html", "structpolicytrain_1_1FitResult" ],
    [ "policytrain::Context< TrainerT >", "classpolicytrain_1_1Context.html", "classpolicytrain_1_1Context" ]
];