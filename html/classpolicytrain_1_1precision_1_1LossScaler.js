var classpolicytrain_1_1precision_1_1LossScaler =
[
    [ "Options", "structpolicytrain_1_1precision_1_1LossScaler_1_1Options.html", "structpolicytrain_1_1precision_1_1LossScaler_1_1Options" ],
    [ "LossScaler", "classpolicytrain_1_1precision_1_1LossScaler.html#ac8811fe56f8b50fb9d9735f67dc17625", null ],
    [ "collect_skips", "classpolicytrain_1_1precision_1_1LossScaler.html#aa1b6b3bb54fb7466e28a80941acbbfa6", null ],
    [ "discard_step", "classpolicytrain_1_1precision_1_1LossScaler.html#a0bd98e1df5af8c14d9c3f8f8e31e8faf", null ],
    [ "found_inf", "classpolicytrain_1_1precision_1_1LossScaler.html#ad0f31bda997291740956042a4d38945b", null ],
    [ "growth_tracker", "classpolicytrain_1_1precision_1_1LossScaler.html#a4f13a6531d30cfc8f3a8164bf1fb0035", null ],
    [ "load_state_dict", "classpolicytrain_1_1precision_1_1LossScaler.html#ab33bb108171c2af2a09ddfbda71fbf3c", null ],
    [ "options", "classpolicytrain_1_1precision_1_1LossScaler.html#a87475931d252118d7e2f25c5f95a9059", null ],
    [ "prepare_capture", "classpolicytrain_1_1precision_1_1LossScaler.html#a12376893f50c2d12a44905aa0c303bd1", null ],
    [ "replayed", "classpolicytrain_1_1precision_1_1LossScaler.html#afbbe4523a5086d6209e72f36fe4dbeaa", null ],
    [ "scale", "classpolicytrain_1_1precision_1_1LossScaler.html#a5f7cf456c52fda35b8b2f85bf28e7078", null ],
    [ "scale_value", "classpolicytrain_1_1precision_1_1LossScaler.html#aa791f0f9e23a156217eab9ac5d51f83d", null ],
    [ "skipped_steps", "classpolicytrain_1_1precision_1_1LossScaler.html#a538b6027e72de019fcfba86c2ae5fdf9", null ],
    [ "state_dict", "classpolicytrain_1_1precision_1_1LossScaler.html#adda82973c347f34877c4cab8c36e5d1c", null ],
    [ "step", "classpolicytrain_1_1precision_1_1LossScaler.html#a86c1a1e529fd8f96b0fbc6fe6bae9fdc", null ],
    [ "step_on_device", "classpolicytrain_1_1precision_1_1LossScaler.html#a0b78b6f1a4d4ee81c7aa2fe539386016", null ],
    [ "unscale", "classpolicytrain_1_1precision_1_1LossScaler.html#aece9af73aa2ca742fc1f4db8e5a52e76", null ],
    [ "update", "classpolicytrain_1_1precision_1_1LossScaler.html#aa5302c1cae486759d81501ad65186331", null ]
];