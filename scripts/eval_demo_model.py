"""Held-out figures of a demo-model folder, as JSON: the numbers of the model card.

    python scripts/eval_demo_model.py [MODEL] [--quick] [--threads N]

MODEL defaults to the shipped demo model. Every figure is on DNA the model never trained on:

* ``copy``: a random 600-bp sequence (seed 7) written twice, mean log P(base) of each copy (exact);
* ``niah``: Genome-NIAH's plain task at the model's native context, haystacks from the far
  held-out human region, 20 rows, greedy exact match of the 24-bp value (``niah_neardup``: the
  near-duplicate tasks, 8 decoy keys 4, 2 or 1 bases from the key);
* ``far_human``: that region (never trained on; another chromosome than any training slice), real
  vs dinucleotide-shuffled, mean log P(base) (``markov_gap``: the same gap for next-base Markov
  chains of orders 4, 6, 8 fitted on the model's training split; ``far_human_demo``: the first two
  windows, the demo's);
* ``generation``: 300 bp after 1,200 held-out bp (far human windows and the *E. coli* held-out
  end), distinct 6-mers of greedy and of sampled (temperature 0.8, top-p 0.95, seed 0) output
  beside the real continuation's;
* ``original_held_out`` (skipped with ``--quick``): per-base accuracy on the held-out ends of the
  four original slices (FNS marginals and exact conditionals) beside next-base Markov chains of
  orders 4-10 fitted on their training split and (``markov_same_training_data``) on the model's
  whole training split; ``all_held_out`` (with ``--all``): every held-out end.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np
import torch

from hexamer.carbon import Carbon
from hexamer.demo import demo_data_files, demo_model_path
from hexamer.demo.context import (
    FAR_HUMAN_REGION,
    copy_score,
    distinct_kmers,
    far_human_file,
    far_human_windows,
    planted_value_retrieval,
    real_vs_shuffled,
)
from hexamer.demo.heldout import heldout_report, heldout_windows
from hexamer.demo.markov import NextBaseMarkov
from hexamer.demo.shuffle import dinucleotide_shuffle

ORIGINAL = ("ecoli_mg1655.fa.gz", "human_chr20.fa.gz", "lambda_phage.fa.gz", "saureus_n315.fa.gz")
ORDERS = (4, 5, 6, 7, 8, 9, 10)


def _generation(carbon: Carbon) -> dict[str, float]:
    _, held = heldout_windows([p for p in demo_data_files() if p.name == "ecoli_mg1655.fa.gz"])
    sources = [*far_human_windows(max_windows=4), held[0][1]]
    out: dict[str, list[float]] = {"greedy": [], "sampled": [], "real": []}
    for seq in sources:
        prompt, truth = seq[:1200], seq[1200:1500]
        greedy = carbon.generate(prompt, max_bp=300, temperature=0).sequence  # type: ignore[union-attr]
        sampled = carbon.generate(prompt, max_bp=300, temperature=0.8, top_p=0.95, seed=0).sequence  # type: ignore[union-attr]
        for key, s in (("greedy", greedy), ("sampled", sampled), ("real", truth)):
            out[key].append(distinct_kmers(s))
    return {f"{k}_distinct_6mers": float(np.mean(v)) for k, v in out.items()} | {"prompts": len(sources)}


def _markov(train_files: list, held_files: list) -> dict[int, float]:
    """Next-base Markov accuracy, orders 4-10, fitted on the training split of ``train_files`` (the
    model's training DNA) and scored on the held-out ends of ``held_files``."""
    train, _ = heldout_windows(train_files)
    _, windows = heldout_windows(held_files)
    out = {}
    for order in ORDERS:
        chain = NextBaseMarkov(order).fit(train)
        right = total = 0
        for _, bases in windows:
            r, n = chain.accuracy(bases)
            right, total = right + r, total + n
        out[order] = right / max(total, 1)
    return out


def _markov_gap(windows: list[str]) -> dict[int, float]:
    """Real minus dinucleotide-shuffled mean log P(base) of next-base Markov chains fitted on the
    model's training split: the reference point for the model's gap."""
    train, _ = heldout_windows(demo_data_files())
    out = {}
    for order in (4, 6, 8):
        chain = NextBaseMarkov(order).fit(train)
        real = np.mean([chain.score(w) for w in windows])
        shuffled = np.mean([chain.score(dinucleotide_shuffle(w, i)) for i, w in enumerate(windows)])
        out[order] = float(real - shuffled)
    return out


def _round(obj: Any) -> Any:
    if isinstance(obj, float):
        return round(obj, 4)
    if isinstance(obj, dict):
        return {k: _round(v) for k, v in obj.items()}
    return obj


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", default=str(demo_model_path()))
    ap.add_argument("--quick", action="store_true", help="skip the held-out accuracy tables")
    ap.add_argument("--all", action="store_true", help="also every held-out end (640 kbp; slow)")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    carbon = Carbon.from_pretrained(args.model)
    report: dict = {"model": args.model, "copy": copy_score(carbon)}
    report["far_human"] = {"region": FAR_HUMAN_REGION, **real_vs_shuffled(carbon, far_human_windows())}
    report["far_human"]["markov_gap"] = _markov_gap(far_human_windows())
    report["far_human_demo"] = real_vs_shuffled(carbon, far_human_windows(max_windows=2))
    report["niah"] = planted_value_retrieval(carbon, far_human_file(), n=20)
    report["niah_neardup"] = {  # the same rows with 8 decoy keys 4, 2 or 1 bases away
        task: planted_value_retrieval(carbon, far_human_file(), n=20, task=task)["exact_match"]
        for task in ("neardup_d4", "neardup_d2", "neardup_d1")
    }
    report["generation"] = _generation(carbon)
    if not args.quick:
        files = demo_data_files()
        original = [p for p in files if p.name in ORIGINAL]
        report["original_held_out"] = heldout_report(carbon, original, orders=ORDERS).to_dict()
        report["original_held_out"]["markov_same_training_data"] = _markov(files, original)
        if args.all:
            report["all_held_out"] = heldout_report(carbon, files, orders=ORDERS).to_dict()
    report["seconds"] = time.perf_counter() - t0
    print(json.dumps(_round(report), indent=2))


if __name__ == "__main__":
    main()
