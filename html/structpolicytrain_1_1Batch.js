var structpolicytrain_1_1Batch =
[
    [ "size", "structpolicytrain_1_1Batch.html#acb1c6ce563bccef8e0b047e4fb7f4fcd", null ],
    [ "to", "structpolicytrain_1_1Batch.html#aa57cf334c736dd801103d492e5751c6e", null ],
    [ "x", "structpolicytrain_1_1Batch.html#a4d186352647f06c7bcc4dab78a99df7a", null ],
    [ "y", "structpolicytrain_1_1Batch.html#ac06efec35cecd71bade09b37a3c8b412", null ]
];