var structpolicytrain_1_1data_1_1AugmentOptions =
[
    [ "crop_padding", "structpolicytrain_1_1data_1_1AugmentOptions.html#a31bb582fef559d3587972b1ae55b98b7", null ],
    [ "enabled", "structpolicytrain_1_1data_1_1AugmentOptions.html#a969f57bfb128a0711cfd39d40c3b2568", null ],
    [ "fill", "structpolicytrain_1_1data_1_1AugmentOptions.html#afaefd5af607e6b2d771055de7f4b36a8", null ],
    [ "horizontal_flip", "structpolicytrain_1_1data_1_1AugmentOptions.html#a84d6fc670a5fae898a25287313a1705d", null ]
];