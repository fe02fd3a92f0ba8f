var structpolicytrain_1_1callbacks_1_1TensorBoard_1_1Options =
[
    [ "dir", "structpolicytrain_1_1callbacks_1_1TensorBoard_1_1Options.html#ac3b2a9901e02d4838e6e954e3f3b070e", null ],
    [ "every", "structpolicytrain_1_1callbacks_1_1TensorBoard_1_1Options.html#a1e1857a866ccf271802889bed06fe700", null ],
    [ "histogram_every", "structpolicytrain_1_1callbacks_1_1TensorBoard_1_1Options.html#a874b4e7f290fea9f876249a4afd7424f", null ],
    [ "hparams", "structpolicytrain_1_1callbacks_1_1TensorBoard_1_1Options.html#a4e59fe917b8325c6a5462317655cff21", null ],
    [ "out", "structpolicytrain_1_1callbacks_1_1TensorBoard_1_1Options.html#aa3f70156e207a12662319106c522966c", null ],
    [ "settings", "structpolicytrain_1_1callbacks_1_1TensorBoard_1_1Options.html#a2e3ded347e3ecceb66e033198da970d0", null ]
];