"""ClassificationReport against sklearn.metrics.classification_report on random labels over 7 classes, one class
never true and one never predicted (scikit-learn from PyPI, in the venv oracle_env.py creates). Compared: per-class
precision, recall, F1 and support, accuracy, macro and weighted averages (rtol 1e-12: the same divisions in
double), and the printed text, character for character, against classification_report(digits=4)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle_env  # noqa: E402

oracle_env.ensure(["scikit-learn"], ["sklearn"])

from sklearn.metrics import classification_report  # noqa: E402

from common import check, close, finish, run_dump  # noqa: E402

d = run_dump("report")
k = d["k"]
labels = list(range(k))
ref = classification_report(d["y_true"], d["y_pred"], labels=labels, output_dict=True, zero_division=0)
ours = d["report"]
n = 0
check(set(d["y_true"]) != set(labels) and set(d["y_pred"]) != set(labels), "the labels leave a class out")
for c in labels:
    for key, rkey in (("precision", "precision"), ("recall", "recall"), ("f1", "f1-score"), ("support", "support")):
        close(ours["classes"][str(c)][key], ref[str(c)][rkey], f"class {c} {key}", 1e-12, 0)
        n += 1
for ok, rk in (("macro_avg", "macro avg"), ("weighted_avg", "weighted avg")):
    for key, rkey in (("precision", "precision"), ("recall", "recall"), ("f1", "f1-score"), ("support", "support")):
        close(ours[ok][key], ref[rk][rkey], f"{rk} {key}", 1e-12, 0)
        n += 1
close(ours["accuracy"], ref["accuracy"], "accuracy", 1e-12, 0)
close(d["accuracy"], ref["accuracy"], "Metrics::accuracy", 1e-12, 0)
text = classification_report(d["y_true"], d["y_pred"], labels=labels, digits=4, zero_division=0)
if d["text"].rstrip("\n") != text.rstrip("\n"):
    print("ours:\n" + d["text"] + "\nscikit-learn:\n" + text)
check(d["text"].rstrip("\n") == text.rstrip("\n"), "the printed report, character for character")
finish("ClassificationReport vs sklearn.metrics.classification_report", n + 3)
