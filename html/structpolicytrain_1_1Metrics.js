var structpolicytrain_1_1Metrics =
[
    [ "get", "structpolicytrain_1_1Metrics.html#aea49a25be5ae52e69ee0b4920194d3b4", null ],
    [ "report", "structpolicytrain_1_1Metrics.html#a30d132127a1484ac696d4b9c7253be09", null ],
    [ "accuracy", "structpolicytrain_1_1Metrics.html#ae6071f0be1cb1c56900372c0353799e0", null ],
    [ "confusion", "structpolicytrain_1_1Metrics.html#a46ae0fcf9a2bffb9ed1acfc16189653a", null ],
    [ "extra", "structpolicytrain_1_1Metrics.html#af128242c8655f9068a1f08c57bab2cff", null ],
    [ "loss", "structpolicytrain_1_1Metrics.html#a366cd64df0e72f8bf71a758fe639f42a", null ],
    [ "samples", "structpolicytrain_1_1Metrics.html#a30fb64196b700513a16b52b1c8198bac", null ]
];