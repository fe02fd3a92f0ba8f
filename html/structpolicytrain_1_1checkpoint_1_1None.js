var structpolicytrain_1_1checkpoint_1_1None =
[
    [ "category", "structpolicytrain_1_1checkpoint_1_1None.html#ad9b1c00384b5a4cc53096532023039ff", null ],
    [ "name", "structpolicytrain_1_1checkpoint_1_1None.html#afc690e18eb8422210b285b1487e2aa40", null ]
];