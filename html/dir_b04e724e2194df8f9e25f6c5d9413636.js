var dir_b04e724e2194df8f9e25f6c5d9413636 =
[
    [ "divergence_rollback.hpp", "divergence__rollback_8hpp.html", "divergence__rollback_8hpp" ],
    [ "early_stopping.hpp", "early__stopping_8hpp.html", "early__stopping_8hpp" ],
    [ "ema.hpp", "ema_8hpp.html", "ema_8hpp" ],
    [ "grad_clip.hpp", "grad__clip_8hpp.html", "grad__clip_8hpp" ],
    [ "metrics_log.hpp", "metrics__log_8hpp.html", "metrics__log_8hpp" ],
    [ "perf_knobs.hpp", "perf__knobs_8hpp.html", "perf__knobs_8hpp" ],
    [ "profiler.hpp", "profiler_8hpp.html", "profiler_8hpp" ],
    [ "progress_bar.hpp", "progress__bar_8hpp.html", "progress__bar_8hpp" ],
    [ "step_phases.hpp", "step__phases_8hpp.html", "step__phases_8hpp" ],
    [ "tensorboard.hpp", "tensorboard_8hpp.html", "tensorboard_8hpp" ]
];