var tensorboard_8hpp =
[
    [ "policytrain::callbacks::TensorBoard", "classpolicytrain_1_1callbacks_1_1TensorBoard.html", "classpolicytrain_1_1callbacks_1_1TensorBoard" ],
    [ "policytrain::callbacks::TensorBoard::Options", "structpolicytrain_1_1callbacks_1_1TensorBoard_1_1Options.html", "structpolicytrain_1_1callbacks_1_1TensorBoard_1_1Options" ]
];