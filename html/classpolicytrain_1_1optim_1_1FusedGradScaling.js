var classpolicytrain_1_1optim_1_1FusedGradScaling =
[
    [ "clear_grad_scaling", "classpolicytrain_1_1optim_1_1FusedGradScaling.html#ac73866c1cb4ee692ebafd880f56d5852", null ],
    [ "found_inf", "classpolicytrain_1_1optim_1_1FusedGradScaling.html#a8f8683813dfa21a693fbaedd3c3f5c69", null ],
    [ "grad_scale", "classpolicytrain_1_1optim_1_1FusedGradScaling.html#af4e63e0c224449e93f18d97dbd777f2b", null ],
    [ "on", "classpolicytrain_1_1optim_1_1FusedGradScaling.html#a9093d7078973d0e978fedb1b42766e10", null ],
    [ "set_grad_scaling", "classpolicytrain_1_1optim_1_1FusedGradScaling.html#a582fdfd41b750f785be201abd1923ce4", null ]
];