var dir_94807959ab2adc30b7b9a1c6a1f5bd94 =
[
    [ "autocast.hpp", "autocast_8hpp.html", "autocast_8hpp" ],
    [ "autocast_guard.hpp", "autocast__guard_8hpp.html", "autocast__guard_8hpp" ],
    [ "fp32.hpp", "fp32_8hpp.html", "fp32_8hpp" ],
    [ "loss_scaler.hpp", "loss__scaler_8hpp.html", "loss__scaler_8hpp" ]
];