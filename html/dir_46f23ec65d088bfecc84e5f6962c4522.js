var dir_46f23ec65d088bfecc84e5f6962c4522 =
[
    [ "accumulation", "dir_f5112e018d83b395e92bece30e1839ef.html", "dir_f5112e018d83b395e92bece30e1839ef" ],
    [ "callbacks", "dir_b04e724e2194df8f9e25f6c5d9413636.html", "dir_b04e724e2194df8f9e25f6c5d9413636" ],
    [ "checkpoint", "dir_f3a70e5eae50d0a3e73b84e08b19254f.html", "dir_f3a70e5eae50d0a3e73b84e08b19254f" ],
    [ "core", "dir_a8ee8fb2336566c4ef99c4078bea60b1.html", "dir_a8ee8fb2336566c4ef99c4078bea60b1" ],
    [ "data", "dir_a3d4603623340402a701ef262754ae41.html", "dir_a3d4603623340402a701ef262754ae41" ],
    [ "io", "dir_37c14ea75b781f9d5cfd7265935c6b21.html", "dir_37c14ea75b781f9d5cfd7265935c6b21" ],
    [ "memory", "dir_f9396e5c75d0918a419b0663270a2457.html", "dir_f9396e5c75d0918a419b0663270a2457" ],
    [ "optim", "dir_a50655ae7ac001c9691bf0e2a0354d43.html", "dir_a50655ae7ac001c9691bf0e2a0354d43" ],
    [ "parallel", "dir_5f529b73ec8428b78a8da3e159d349b0.html", "dir_5f529b73ec8428b78a8da3e159d349b0" ],
    [ "precision", "dir_94807959ab2adc30b7b9a1c6a1f5bd94.html", "dir_94807959ab2adc30b7b9a1c6a1f5bd94" ],
    [ "schedule", "dir_7010c9f9cf7045f173f51c0e6ac11f58.html", "dir_7010c9f9cf7045f173f51c0e6ac11f58" ],
    [ "step", "dir_609598a8545e3f7208839bdac3a3e8ac.html", "dir_609598a8545e3f7208839bdac3a3e8ac" ],
    [ "all.hpp", "all_8hpp.html", null ],
    [ "checkpoint.hpp", "checkpoint_8hpp.html", null ],
    [ "datasets.hpp", "datasets_8hpp.html", null ],
    [ "observe.hpp", "observe_8hpp.html", null ],
    [ "parallel.hpp", "parallel_8hpp.html", null ],
    [ "policytrain.hpp", "policytrain_8hpp.html", null ],
    [ "trainer.hpp", "trainer_8hpp.html", "trainer_8hpp" ]
];