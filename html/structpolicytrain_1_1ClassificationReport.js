var structpolicytrain_1_1ClassificationReport =
[
    [ "from_confusion", "structpolicytrain_1_1ClassificationReport.html#abf2281dc78c329c63f8b964535c58b19", null ],
    [ "to_json", "structpolicytrain_1_1ClassificationReport.html#ad95a66a2fd4dac42b77cd63ccc092f03", null ],
    [ "to_string", "structpolicytrain_1_1ClassificationReport.html#ae4f9a92752229f333998386d12ecef42", null ],
    [ "accuracy", "structpolicytrain_1_1ClassificationReport.html#a3e4a3ddcd46ebe5ca3e168eefa291e8c", null ],
    [ "classes", "structpolicytrain_1_1ClassificationReport.html#a8a71e9258b23616e9b1652e88050ec28", null ],
    [ "macro_avg", "structpolicytrain_1_1ClassificationReport.html#ae4eff5f5744a48d50ec854bb1848aae7", null ],
    [ "total", "structpolicytrain_1_1ClassificationReport.html#a7e2fabd16a5eab0c789f45e50f15dd5c", null ],
    [ "weighted_avg", "structpolicytrain_1_1ClassificationReport.html#a6ab6f6e9a1f06d3e947e60d4d3353e23", null ]
];