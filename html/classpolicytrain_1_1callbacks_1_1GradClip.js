var classpolicytrain_1_1callbacks_1_1GradClip =
[
    [ "Options", "structpolicytrain_1_1callbacks_1_1GradClip_1_1Options.html", "structpolicytrain_1_1callbacks_1_1GradClip_1_1Options" ],
    [ "Mode", "classpolicytrain_1_1callbacks_1_1GradClip.html#ad1044c82e77fa7d3b434f54e5539a269", [
      [ "none", "classpolicytrain_1_1callbacks_1_1GradClip.html#ad1044c82e77fa7d3b434f54e5539a269a334c4a4c42fdb79d7ebc3e73b517e6f8", null ],
      [ "norm", "classpolicytrain_1_1callbacks_1_1GradClip.html#ad1044c82e77fa7d3b434f54e5539a269a589275fdd4e5908f18310b56beaf439b", null ],
      [ "value", "classpolicytrain_1_1callbacks_1_1GradClip.html#ad1044c82e77fa7d3b434f54e5539a269a2063c1608d6e0baf80249c42e2be5804", null ]
    ] ],
    [ "GradClip", "classpolicytrain_1_1callbacks_1_1GradClip.html#aa08e728d0a56acb5081239f80d14b494", null ],
    [ "before_step", "classpolicytrain_1_1callbacks_1_1GradClip.html#a80ce2dd512bd3400810abb5ac11e19ad", null ],
    [ "clips_by_norm", "classpolicytrain_1_1callbacks_1_1GradClip.html#a4ca358140e32d74a4d20379d2167b755", null ],
    [ "describe", "classpolicytrain_1_1callbacks_1_1GradClip.html#ae1588e755526bcd209e20eca7d9d26e5", null ],
    [ "last_norm", "classpolicytrain_1_1callbacks_1_1GradClip.html#a863b98ce1a6ada139a7286b6c0cb45e8", null ],
    [ "last_norm_tensor", "classpolicytrain_1_1callbacks_1_1GradClip.html#ae553a7d247a0ff01ceb7f1878a9fde8c", null ],
    [ "options", "classpolicytrain_1_1callbacks_1_1GradClip.html#aeac7db8cea23cb2bfef6fd18d5ee82b7", null ],
    [ "graph_safe", "classpolicytrain_1_1callbacks_1_1GradClip.html#af9517d1fe372c7712b8092c77faf7ca8", null ],
    [ "name", "classpolicytrain_1_1callbacks_1_1GradClip.html#ae5bb4ce18343ec13240cae3024c67006", null ]
];