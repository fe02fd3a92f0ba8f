var classpolicytrain_1_1checkpoint_1_1AsyncWriter =
[
    [ "AsyncWriter", "classpolicytrain_1_1checkpoint_1_1AsyncWriter.html#a061dcfe5f8f95a87b7411ea753ca79cc", null ],
    [ "~AsyncWriter", "classpolicytrain_1_1checkpoint_1_1AsyncWriter.html#a616bbcfd42d4fdd283a63914eb2c97dc", null ],
    [ "busy", "classpolicytrain_1_1checkpoint_1_1AsyncWriter.html#a8fa6b8235283bed205112a31f51323f0", null ],
    [ "submit", "classpolicytrain_1_1checkpoint_1_1AsyncWriter.html#ab795e4ec2888be47dd443df7e21c7068", null ],
    [ "wait", "classpolicytrain_1_1checkpoint_1_1AsyncWriter.html#ad5c853a73e5246fc3d49bf50d977e038", null ]
];