var structpolicytrain_1_1ClassScores =
[
    [ "f1", "structpolicytrain_1_1ClassScores.html#ac728dbef5d68ecd02b30b1910b5deb04", null ],
    [ "label", "structpolicytrain_1_1ClassScores.html#ad132c498d3b7a82fee13efb70beac505", null ],
    [ "precision", "structpolicytrain_1_1ClassScores.html#a793ec1608b6ab540fa2bd949975e085d", null ],
    [ "recall", "structpolicytrain_1_1ClassScores.html#ac27ddfce5beb6cc594cc0385af8bb765", null ],
    [ "support", "structpolicytrain_1_1ClassScores.html#ae16bf6d672b9043dc5bb01a5ff720513", null ]
];