var classpolicytrain_1_1callbacks_1_1TensorBoard =
[
    [ "Options", "structpolicytrain_1_1callbacks_1_1TensorBoard_1_1Options.html", "structpolicytrain_1_1callbacks_1_1TensorBoard_1_1Options" ],
    [ "TensorBoard", "classpolicytrain_1_1callbacks_1_1TensorBoard.html#ae822e77f406cb380e5a82f377812c261", null ],
    [ "after_step", "classpolicytrain_1_1callbacks_1_1TensorBoard.html#ae967416ed00f30b4c31cc2a01dd76766", null ],
    [ "around_backward", "classpolicytrain_1_1callbacks_1_1TensorBoard.html#a3a92379a93fac54d0f1f3561f6bac140", null ],
    [ "around_forward", "classpolicytrain_1_1callbacks_1_1TensorBoard.html#a6c85f9c73253d7f23831e90b0ee49cfa", null ],
    [ "describe", "classpolicytrain_1_1callbacks_1_1TensorBoard.html#a008acc2d96ef15bb9c72fd7ce3503c2b", null ],
    [ "enabled", "classpolicytrain_1_1callbacks_1_1TensorBoard.html#abd2bc08f2a58b57b0bdb1faa79cd6083", null ],
    [ "file", "classpolicytrain_1_1callbacks_1_1TensorBoard.html#aad87b989b7cc2bf010e1fe21312f68c4", null ],
    [ "on_epoch_begin", "classpolicytrain_1_1callbacks_1_1TensorBoard.html#a91afd0cf608b0726489582d906f478b7", null ],
    [ "on_fit_begin", "classpolicytrain_1_1callbacks_1_1TensorBoard.html#adaeca4d2d2d287f7c5e763ab330e0458", null ],
    [ "on_fit_end", "classpolicytrain_1_1callbacks_1_1TensorBoard.html#a878d25b24983c03024e553b310def7ed", null ],
    [ "on_validation_end", "classpolicytrain_1_1callbacks_1_1TensorBoard.html#a2fb30168c915ce9b7aa4faad62d5552b", null ],
    [ "name", "classpolicytrain_1_1callbacks_1_1TensorBoard.html#a644384c78eccee0c2ede6df3684cfb46", null ]
];