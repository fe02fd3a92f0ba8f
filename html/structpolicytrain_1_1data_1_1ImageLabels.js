var structpolicytrain_1_1data_1_1ImageLabels =
[
    [ "images", "structpolicytrain_1_1data_1_1ImageLabels.html#a09e2c45b3fc45add337ccf928851083b", null ],
    [ "labels", "structpolicytrain_1_1data_1_1ImageLabels.html#a6daa8893135a7991de8723d1fbccb43a", null ]
];