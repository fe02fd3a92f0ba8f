"""The torchmetrics values of the epoch-level metrics test (tests/unit/test_epoch_metrics.cpp).

Usage: torchmetrics_oracle.py IN.json OUT.json. IN holds the predictions and targets (as float64 lists) of a
regression, a 5-class and a binary task; OUT gets each metric's value as torchmetrics computes it, named as the test
declares them."""
import json
import sys

import torch
import torchmetrics as tm
import torchmetrics.classification as tc

data = json.load(open(sys.argv[1]))
out = {}

p = torch.tensor(data["regression"]["prediction"], dtype=torch.float64)
t = torch.tensor(data["regression"]["target"], dtype=torch.float64)
for name, metric in {"mse": tm.MeanSquaredError(), "rmse": tm.MeanSquaredError(squared=False),
                     "mae": tm.MeanAbsoluteError(), "r2": tm.R2Score()}.items():
    metric = metric.to(torch.float64)
    metric.update(p, t)
    out[name] = metric.compute().item()

k = data["multiclass"]["classes"]
p = torch.tensor(data["multiclass"]["prediction"], dtype=torch.float64)
t = torch.tensor(data["multiclass"]["target"], dtype=torch.long)
for avg in ("micro", "macro", "weighted"):
    out[f"accuracy_{avg}"] = tc.MulticlassAccuracy(k, average=avg)(p, t).item()
    out[f"top2_accuracy_{avg}"] = tc.MulticlassAccuracy(k, average=avg, top_k=2)(p, t).item()
    out[f"top2_precision_{avg}"] = tc.MulticlassPrecision(k, average=avg, top_k=2)(p, t).item()
    out[f"top2_recall_{avg}"] = tc.MulticlassRecall(k, average=avg, top_k=2)(p, t).item()
    out[f"top2_f1_{avg}"] = tc.MulticlassF1Score(k, average=avg, top_k=2)(p, t).item()
    out[f"precision_{avg}"] = tc.MulticlassPrecision(k, average=avg)(p, t).item()
    out[f"recall_{avg}"] = tc.MulticlassRecall(k, average=avg)(p, t).item()
    out[f"f1_{avg}"] = tc.MulticlassF1Score(k, average=avg)(p, t).item()
out["confusion_matrix"] = tc.MulticlassConfusionMatrix(k)(p, t).tolist()

p = torch.tensor(data["binary"]["prediction"], dtype=torch.float64)
t = torch.tensor(data["binary"]["target"], dtype=torch.long)
out["auroc"] = tc.BinaryAUROC()(p, t).item()

out["torchmetrics"] = tm.__version__
json.dump(out, open(sys.argv[2], "w"))
