"""Measure one fine-tuning setting on the tutorial's planted-motif task (docs/finetune.md, "Defaults
and why"): ``fit`` on the demo model, then the test Pearson r of the best head.

    python scripts/measure_finetune_defaults.py NAME LABEL OPTIONS_JSON [--n 2000]

LABEL is ``motif`` (planted TGACTCA sites + noise) or ``gc`` (GC fraction of the window);
OPTIONS_JSON holds ``FitOptions`` fields, e.g. ``'{"method": "full", "lr": 1e-3, "epochs": 6}'``
(``lora`` as a dict of ``LoraOptions`` fields). The split is the tutorial's: chromosome labels
1 and 2 train, 19 and X validate, 7 and 13 test; labels z-scored on the training rows. One line of
JSON on stdout: the options, the fit's seconds, the best step, validation and test Pearson r and
the validation r of every evaluation.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from scipy import stats

from hexamer.demo.motif_task import CHROMS, motif_task
from hexamer.demo.paths import demo_model_path
from hexamer.finetune import FitOptions, LabelledSet, TaskSpec
from hexamer.finetune.fit import fit
from hexamer.finetune.options import LoraOptions
from hexamer.finetune.predict import predict


def _metric(labels: np.ndarray, outputs: np.ndarray) -> float:
    if np.std(outputs) == 0:
        return math.nan
    return float(stats.pearsonr(labels[:, 0], outputs[:, 0])[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("name")
    parser.add_argument("label", choices=("motif", "gc"))
    parser.add_argument("options", help="FitOptions fields as JSON")
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    seqs, activity, _ = motif_task(args.n, length=120, seed=5)
    y = np.asarray(activity, np.float64)
    if args.label == "gc":
        y = np.array([(s.count("G") + s.count("C")) / len(s) for s in seqs])
    chroms = [CHROMS[i % len(CHROMS)] for i in range(args.n)]
    rows = {
        part: [i for i, c in enumerate(chroms) if c in names]
        for part, names in (("train", ("1", "2")), ("valid", ("19", "X")), ("test", ("7", "13")))
    }
    mean, sd = y[rows["train"]].mean(), y[rows["train"]].std()

    def subset(index: list[int]) -> LabelledSet:
        labels = ((y[index] - mean) / sd).astype(np.float32)[:, None]
        return LabelledSet(
            ids=tuple(f"s{i}" for i in index), sequences=tuple(seqs[i] for i in index), labels=labels
        )

    given = json.loads(args.options)
    lora = given.pop("lora", None)
    options = FitOptions(**given, **({"lora": LoraOptions(**lora)} if lora else {}))
    task = TaskSpec("regression", ("y",))
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        result = fit(
            demo_model_path(), subset(rows["train"]), subset(rows["valid"]), task, options, Path(tmp),
            metric=_metric,
        )  # fmt: skip
        seconds = time.perf_counter() - started
        predicted = predict(result.best_folder, [seqs[i] for i in rows["test"]])
    test_r = float(stats.pearsonr(y[rows["test"]], predicted[:, 0])[0])
    history = [[h["step"], None if h["metric"] is None else round(h["metric"], 3)] for h in result.history]
    print(
        json.dumps(
            {
                "name": args.name, "label": args.label, "options": args.options, "fit_s": round(seconds),
                "best_step": result.best_step, "valid": result.best_score and round(result.best_score, 3),
                "test_pearson": round(test_r, 3), "history": history,
            }
        )
    )  # fmt: skip


if __name__ == "__main__":
    main()
