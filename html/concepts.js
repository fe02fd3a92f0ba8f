var concepts =
[
    [ "policytrain", null, [
      [ "TrainableTask", "conceptpolicytrain_1_1TrainableTask.html", null ],
      [ "EvaluableTask", "conceptpolicytrain_1_1EvaluableTask.html", null ],
      [ "HasOnFitBegin", "conceptpolicytrain_1_1HasOnFitBegin.html", null ],
      [ "HasOnFitEnd", "conceptpolicytrain_1_1HasOnFitEnd.html", null ],
      [ "HasOnEpochBegin", "conceptpolicytrain_1_1HasOnEpochBegin.html", null ],
      [ "HasOnEpochEnd", "conceptpolicytrain_1_1HasOnEpochEnd.html", null ],
      [ "HasAroundForward", "conceptpolicytrain_1_1HasAroundForward.html", null ],
      [ "HasTransformLoss", "conceptpolicytrain_1_1HasTransformLoss.html", null ],
      [ "HasAroundBackward", "conceptpolicytrain_1_1HasAroundBackward.html", null ],
      [ "HasShouldStep", "conceptpolicytrain_1_1HasShouldStep.html", null ],
      [ "HasBeforeStep", "conceptpolicytrain_1_1HasBeforeStep.html", null ],
      [ "HasStep", "conceptpolicytrain_1_1HasStep.html", null ],
      [ "HasAfterStep", "conceptpolicytrain_1_1HasAfterStep.html", null ],
      [ "HasOnStepEnd", "conceptpolicytrain_1_1HasOnStepEnd.html", null ],
      [ "HasAroundEvaluate", "conceptpolicytrain_1_1HasAroundEvaluate.html", null ],
      [ "HasFlushChecks", "conceptpolicytrain_1_1HasFlushChecks.html", null ],
      [ "HasRunStep", "conceptpolicytrain_1_1HasRunStep.html", null ],
      [ "HasPrepareCapture", "conceptpolicytrain_1_1HasPrepareCapture.html", null ],
      [ "HasOnReplay", "conceptpolicytrain_1_1HasOnReplay.html", null ],
      [ "HasGraphRefusal", "conceptpolicytrain_1_1HasGraphRefusal.html", null ],
      [ "InCapturedStep", "conceptpolicytrain_1_1InCapturedStep.html", null ],
      [ "HasOnValidationEnd", "conceptpolicytrain_1_1HasOnValidationEnd.html", null ],
      [ "Stateful", "conceptpolicytrain_1_1Stateful.html", null ]
    ] ]
];