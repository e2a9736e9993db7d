"""bf16 autocast against float32 fine-tuning, step by step, on the tutorial's planted-motif task
(docs/finetune.md, "Precision"): the same demo model, head, batches and seed in both precisions.

    python scripts/measure_finetune_bf16.py [--method full|lora] [--steps 40] [--n 600]

Each step's training loss and gradient norm (before clipping) in float32 and under bf16 autocast
(float32 weights and optimizer), and their relative differences. One line of JSON on stdout.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch

from hexamer.demo.motif_task import motif_task
from hexamer.demo.paths import demo_model_path
from hexamer.finetune import FitOptions, LabelledSet, TaskSpec
from hexamer.finetune.fit import build_model
from hexamer.finetune.fit_loop import Trainer


def run(method: str, bf16: bool, rows: LabelledSet, steps: int) -> tuple[list[float], list[float]]:
    task = TaskSpec("regression", ("y",))
    options = FitOptions(method=method, steps=steps, bf16=bf16, seed=3).resolved(0)
    settings = {"max_length": max(map(len, rows.sequences))}
    model = build_model(demo_model_path(), task, options, settings)
    trainer = Trainer(model, rows, None, task, options, "mse", None, False)
    model.train()
    losses: list[float] = []
    norms: list[float] = []
    params = [p for p in model.parameters() if p.requires_grad]
    step = trainer.optimizer.step

    def norm_then_step(*args: object, **kwargs: object) -> object:
        # before the step: the fused AdamW applies the clip factor to the gradients in place
        norms.append(float(torch.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None])))
        return step(*args, **kwargs)

    trainer.optimizer.step = norm_then_step  # type: ignore[method-assign]
    for _ in range(steps):
        losses.append(trainer.train_step()[0])
    return losses, norms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--method", choices=("full", "lora"), default="full")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--n", type=int, default=600)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    seqs, activity, _ = motif_task(args.n, length=120, seed=5)
    y = np.asarray(activity, np.float64)
    labels = ((y - y.mean()) / y.std()).astype(np.float32)[:, None]
    rows = LabelledSet(tuple(f"s{i}" for i in range(args.n)), tuple(seqs), labels)
    fp32 = run(args.method, False, rows, args.steps)
    bf16 = run(args.method, True, rows, args.steps)
    loss32, loss16 = np.array(fp32[0]), np.array(bf16[0])
    norm32, norm16 = np.array(fp32[1]), np.array(bf16[1])
    print(
        json.dumps(
            {
                "method": args.method, "steps": args.steps,
                "loss_fp32": [round(x, 4) for x in loss32], "loss_bf16": [round(x, 4) for x in loss16],
                "grad_norm_fp32": [round(x, 4) for x in norm32], "grad_norm_bf16": [round(x, 4) for x in norm16],
                "loss_rel_diff_max": float(np.max(np.abs(loss16 - loss32) / np.abs(loss32))),
                "loss_rel_diff_median": float(np.median(np.abs(loss16 - loss32) / np.abs(loss32))),
                "grad_norm_rel_diff_max": float(np.max(np.abs(norm16 - norm32) / norm32)),
                "grad_norm_rel_diff_median": float(np.median(np.abs(norm16 - norm32) / norm32)),
                "first_step_loss": [float(loss32[0]), float(loss16[0])],
                "last5_mean_loss": [float(loss32[-5:].mean()), float(loss16[-5:].mean())],
            }
        )
    )  # fmt: skip


if __name__ == "__main__":
    main()
