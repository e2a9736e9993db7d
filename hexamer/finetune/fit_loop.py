"""The optimisation loop behind :func:`hexamer.finetune.fit`: batches, steps, evaluations, checkpoints.

A probe runs the same loop on pooled features computed once (both strands when ``rc_augment``),
so an epoch costs a matrix product instead of a forward pass; with ``probe_ridge`` its head is
solved in closed form instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hexamer.finetune.head import SequenceClassifier
from hexamer.finetune.losses import compute_loss, outputs_of
from hexamer.finetune.options import FitOptions
from hexamer.finetune.predict import autocast_context, pooled_features, run_batches
from hexamer.finetune.probe import fit_logistic_probe
from hexamer.finetune.state import load_fit_state, save_fit_state
from hexamer.finetune.task import LabelledSet, TaskSpec
from hexamer.io import reverse_complement
from hexamer.train.schedule import lr_factor

__all__ = ["FitProgress", "Trainer"]

_RC_STREAM = 1_000_003  # separates the strand draws from the epoch permutations
_SHIFT_STREAM = 1_000_033  # and the shift draws from both


@dataclass(frozen=True)
class FitProgress:
    """One optimizer step done (``valid_*`` set when it ended with an evaluation)."""

    step: int
    total_steps: int
    epoch: float
    train_loss: float
    lr: float
    valid_loss: float | None = None
    valid_metric: float | None = None
    best: bool = False


def _labels_tensor(task: TaskSpec, labels: np.ndarray, device: torch.device) -> torch.Tensor:
    if task.kind in ("binary", "multiclass"):
        return torch.as_tensor(labels, dtype=torch.int64, device=device)
    return torch.as_tensor(labels, dtype=torch.float32, device=device)


class Trainer:
    """State of one run; :meth:`run` trains until the last step or early stopping."""

    def __init__(
        self,
        model: SequenceClassifier,
        train: LabelledSet,
        valid: LabelledSet | None,
        task: TaskSpec,
        options: FitOptions,
        loss: str,
        metric: Callable[[np.ndarray, np.ndarray], float] | None,
        higher_is_better: bool,
    ) -> None:
        self.model, self.train, self.valid, self.task, self.options = model, train, valid, task, options
        self.loss, self.metric = loss, metric
        self.higher_is_better = higher_is_better if metric is not None else False
        self.device = model.device
        self.k = model.tokenizer.layout.k
        self.micro_per_epoch = math.ceil(len(train) / options.batch_size)
        self.steps_per_epoch = math.ceil(self.micro_per_epoch / options.grad_accum)
        self.total_steps = options.steps or options.epochs * self.steps_per_epoch
        cw = options.class_weights
        self.class_weights = None if cw is None else torch.tensor(cw, dtype=torch.float32, device=self.device)
        self.train_labels = _labels_tensor(task, train.labels, self.device)
        self.train_weights = (
            None if train.weights is None else torch.as_tensor(train.weights, device=self.device)
        )
        self.optimizer = self._optimizer()
        self.step, self.best_step, self.bad_evals, self.plateau_bad = 0, -1, 0, 0
        self.best_score, self.plateau_scale, self.stopped_early = math.nan, 1.0, False
        self.history: list[dict[str, Any]] = []
        self.fingerprint = ""
        self.save_best: Callable[[], None] = lambda: None
        #: probe: the best head so far, written (with the frozen backbone) at checkpoints and at the end
        #: rather than at every improvement, which would rewrite the whole model each epoch
        self.best_head: torch.Tensor | None = None
        self.features: dict[str, np.ndarray] = {}
        self.probe_fit: dict[str, Any] | None = None  # the logistic probe's C and its validation scores
        self._order: tuple[int, np.ndarray] = (-1, np.empty(0, dtype=np.int64))  # (epoch, its row order)
        if options.method == "probe":
            self._cache_features()

    # ---------------------------------------------------------------- setup

    def _optimizer(self) -> torch.optim.AdamW:
        """AdamW: decay on matrices only; the new head at ``head_lr`` (scaled with the schedule)."""
        head = {id(p) for p in self.model.score.parameters()}
        params = [p for p in self.model.parameters() if p.requires_grad]
        wd, ratio = self.options.weight_decay, self.options.head_lr / self.options.lr
        groups = [
            {"params": [p for p in params if p.dim() >= 2 and id(p) not in head], "weight_decay": wd},
            {"params": [p for p in params if p.dim() < 2 and id(p) not in head], "weight_decay": 0.0},
            {"params": [p for p in params if id(p) in head], "weight_decay": wd, "lr_ratio": ratio},
        ]
        # fused: one kernel over all tensors instead of a Python loop of ~10 ops per tensor
        # (about 10x faster a step on CPU; what transformers.Trainer uses by default)
        fused = all(p.device.type in ("cpu", "cuda") and p.is_floating_point() for p in params)
        return torch.optim.AdamW(
            [g for g in groups if g["params"]],
            lr=self.options.lr,
            betas=(0.9, self.options.adam_beta2),
            fused=fused or None,
        )

    def _cache_features(self) -> None:
        """Pooled features of every row, once (and of its reverse complement where needed)."""
        o = self.options

        def feats(seqs: tuple[str, ...]) -> np.ndarray:
            return pooled_features(self.model, seqs, batch_size=o.eval_batch_size, bf16=o.bf16)

        self.features["train"] = feats(self.train.sequences)
        if o.rc_augment:
            self.features["train_rc"] = feats(tuple(reverse_complement(s) for s in self.train.sequences))
        if self.valid is not None:
            self.features["valid"] = feats(self.valid.sequences)
            if o.rc_average:
                self.features["valid_rc"] = feats(tuple(reverse_complement(s) for s in self.valid.sequences))

    # ---------------------------------------------------------------- batches

    def micro_batch(self, m: int) -> tuple[np.ndarray, np.ndarray]:
        """Row indices and reverse-complement flags of micro-batch ``m`` of the run."""
        epoch, pos = divmod(m, self.micro_per_epoch)
        if self._order[0] != epoch:
            self._order = (
                epoch,
                np.random.default_rng([self.options.seed, epoch]).permutation(len(self.train)),
            )
        perm = self._order[1]
        index = perm[pos * self.options.batch_size : (pos + 1) * self.options.batch_size]
        if not self.options.rc_augment:
            return index, np.zeros(len(index), dtype=bool)
        flags = np.random.default_rng([self.options.seed, _RC_STREAM, m]).random(len(index)) < 0.5
        return index, flags

    def shifts(self, m: int, n: int) -> np.ndarray:
        """Bases cut from the start of each row of micro-batch ``m`` (``shift_augment``: 0..k-1)."""
        if not self.options.shift_augment:
            return np.zeros(n, dtype=np.int64)
        return np.random.default_rng([self.options.seed, _SHIFT_STREAM, m]).integers(0, self.k, n)

    def logits(self, index: np.ndarray, rc: np.ndarray, shift: np.ndarray | None = None) -> torch.Tensor:
        if self.options.method == "probe":
            x = self.features["train"][index]
            if rc.any():
                x = np.where(rc[:, None], self.features["train_rc"][index], x)
            w = self.model.score.weight
            return self.model.score(torch.as_tensor(x, device=w.device, dtype=w.dtype)).float()
        seqs = self.train.sequences
        batch = [reverse_complement(seqs[i]) if f else seqs[i] for i, f in zip(index, rc, strict=True)]
        if shift is not None:  # never the whole row: a row shorter than the shift keeps its last base
            batch = [b[min(int(s), len(b) - 1) :] for b, s in zip(batch, shift, strict=True)]
        rows = self.model.encode(batch)
        with autocast_context(self.device, self.options.bf16):
            return self.model(rows.ids_on(self.device), rows.mask_on(self.device))

    def lr_at(self, step: int) -> float:
        o = self.options
        factor = lr_factor(
            step,
            steps=self.total_steps,
            warmup_steps=round(o.warmup * self.total_steps),
            schedule="constant" if o.schedule == "plateau" else o.schedule,
            min_lr_ratio=o.min_lr_ratio,
        )
        return o.lr * factor * self.plateau_scale

    # ---------------------------------------------------------------- loop

    def train_step(self) -> tuple[float, float]:
        """One optimizer step over ``grad_accum`` micro-batches: (mean loss, learning rate)."""
        o = self.options
        lr = self.lr_at(self.step)
        for group in self.optimizer.param_groups:
            group["lr"] = lr * group.get("lr_ratio", 1.0)
        self.optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for k in range(o.grad_accum):
            m = self.step * o.grad_accum + k
            index, rc = self.micro_batch(m)
            shift = self.shifts(m, len(index)) if o.shift_augment else None
            idx = torch.as_tensor(index, device=self.device)
            weights = None if self.train_weights is None else self.train_weights[idx]
            value = compute_loss(
                self.loss, self.logits(index, rc, shift), self.train_labels[idx], weights=weights,
                class_weights=self.class_weights, huber_delta=o.huber_delta, pearson_lambda=o.pearson_lambda,
            )  # fmt: skip
            if not torch.isfinite(value.detach()):
                raise FloatingPointError(
                    f"training diverged at step {self.step + 1}: the loss is {float(value.detach())} "
                    "(lower lr, keep max_grad_norm, or check the labels' scale)"
                )
            (value / o.grad_accum).backward()
            total += float(value.detach()) / o.grad_accum
        if o.max_grad_norm is not None:
            params = [p for g in self.optimizer.param_groups for p in g["params"]]
            torch.nn.utils.clip_grad_norm_(params, o.max_grad_norm)
        self.optimizer.step()
        self.step += 1
        return total, lr

    def run(self, out: Path, on_progress: Callable[[FitProgress], None] | None) -> None:
        o = self.options
        if o.probe_ridge is not None or o.probe_logistic:
            if self.step == 0:
                self.solve_ridge() if o.probe_ridge is not None else self.solve_logistic()
                self.step = 1
                if self.valid is not None:
                    self.evaluate(1.0, math.nan)
                    if self.probe_fit is not None:  # which C, and why
                        self.history[-1]["probe"] = self.probe_fit
                self.flush_best()
            return
        self.model.train(o.method != "probe")
        while self.step < self.total_steps and not self.stopped_early:
            train_loss, lr = self.train_step()
            last = self.step == self.total_steps
            due = self.step % (o.eval_every or self.steps_per_epoch) == 0
            evaluated = self.valid is not None and (due or last)
            record = self.evaluate(lr, train_loss) if evaluated else {}
            if o.checkpoint_every:
                ckpt_due = self.step % o.checkpoint_every == 0
            else:  # a probe's steps are cheap: it checkpoints at the end only
                ckpt_due = evaluated and o.method != "probe"
            if ckpt_due or last or self.stopped_early:
                self.flush_best()
                save_fit_state(out, self.model, self.optimizer, self.state_json())
            if on_progress is not None:
                on_progress(
                    FitProgress(
                        self.step, self.total_steps, self.step / self.steps_per_epoch, train_loss, lr,
                        record.get("valid_loss"), record.get("metric"), bool(record.get("best")),
                    )
                )  # fmt: skip
        self.flush_best()
        self.model.eval()

    def keep_best(self) -> None:
        """Record the model of this evaluation as the best (see :attr:`best_head`)."""
        if self.options.method == "probe":
            self.best_head = self.model.score.weight.detach().clone()
        else:
            self.save_best()

    def flush_best(self) -> None:
        """Write a best probe head kept in memory, leaving the current head in place."""
        if self.best_head is None:
            return
        weight = self.model.score.weight
        current = weight.detach().clone()
        try:
            with torch.no_grad():
                weight.copy_(self.best_head)
            self.save_best()
        finally:
            with torch.no_grad():
                weight.copy_(current)
        self.best_head = None

    # ---------------------------------------------------------------- evaluation

    def valid_logits(self) -> np.ndarray:
        """Logits of the validation rows, averaged over both strands when ``rc_average``."""
        assert self.valid is not None
        o = self.options
        if o.method == "probe":
            w = self.model.score.weight

            def head(x: np.ndarray) -> np.ndarray:
                with torch.no_grad():
                    return (
                        self.model.score(torch.as_tensor(x, device=w.device, dtype=w.dtype))
                        .float()
                        .cpu()
                        .numpy()
                    )

            out = head(self.features["valid"])
            return (out + head(self.features["valid_rc"])) / 2 if o.rc_average else out
        seqs = self.valid.sequences
        out = run_batches(self.model, seqs, self.model.forward, batch_size=o.eval_batch_size, bf16=o.bf16)
        if o.rc_average:
            rc = tuple(reverse_complement(s) for s in seqs)
            out = (
                out
                + run_batches(self.model, rc, self.model.forward, batch_size=o.eval_batch_size, bf16=o.bf16)
            ) / 2
        return out

    def evaluate(self, lr: float, train_loss: float) -> dict[str, Any]:
        """Score the validation set, keep the best head, update early stopping and the plateau."""
        assert self.valid is not None
        o = self.options
        logits = torch.as_tensor(self.valid_logits())
        labels = _labels_tensor(self.task, self.valid.labels, torch.device("cpu"))
        weights = None if self.valid.weights is None else torch.as_tensor(self.valid.weights)
        cw = None if self.class_weights is None else self.class_weights.cpu()
        valid_loss = float(
            compute_loss(self.loss, logits, labels, weights=weights, class_weights=cw,
                         huber_delta=o.huber_delta, pearson_lambda=o.pearson_lambda)
        )  # fmt: skip
        value = math.nan
        if self.metric is not None:
            keep = (
                np.ones(len(self.valid), bool) if self.valid.metric_mask is None else self.valid.metric_mask
            )
            outputs = outputs_of(self.task, logits).numpy()
            value = float(self.metric(self.valid.labels[keep], outputs[keep]))
        score = value if self.metric is not None else valid_loss
        better = math.isfinite(score) and (
            math.isnan(self.best_score)
            or (score > self.best_score if self.higher_is_better else score < self.best_score)
        )
        if better:
            self.best_score, self.best_step, self.bad_evals, self.plateau_bad = score, self.step, 0, 0
            self.keep_best()
        elif not math.isnan(self.best_score) or math.isfinite(score):
            # an undefined metric before any defined one (constant outputs early on) is no verdict
            self.bad_evals += 1
            self.plateau_bad += 1
            if o.schedule == "plateau" and self.plateau_bad >= o.plateau_patience:
                self.plateau_scale *= o.plateau_factor
                self.plateau_bad = 0
            if o.patience is not None and self.bad_evals >= o.patience:
                self.stopped_early = True
        record = {
            "step": self.step, "epoch": self.step / self.steps_per_epoch, "lr": lr, "train_loss": train_loss,
            "valid_loss": valid_loss, "metric": None if math.isnan(value) else value, "best": better,
        }  # fmt: skip
        self.history.append(record)
        return record

    def solve_ridge(self) -> None:
        """Closed-form ridge head on the cached features (weighted rows, both strands if augmented)."""
        x = self.features["train"].astype(np.float64)
        y = self.train.labels.astype(np.float64)
        w = np.ones(len(x)) if self.train.weights is None else self.train.weights.astype(np.float64)
        if self.options.rc_augment:
            x, y, w = np.vstack([x, self.features["train_rc"]]), np.vstack([y, y]), np.concatenate([w, w])
        assert self.options.probe_ridge is not None
        gram = (x * w[:, None]).T @ x + self.options.probe_ridge * np.eye(x.shape[1])
        coef = np.linalg.solve(gram, (x * w[:, None]).T @ y)  # (hidden, num_labels)
        with torch.no_grad():
            self.model.score.weight.copy_(torch.as_tensor(coef.T, dtype=self.model.score.weight.dtype))

    def solve_logistic(self) -> None:
        """The head as scikit-learn's logistic regression on the cached features, C chosen on
        the validation rows by the selection metric (:mod:`hexamer.finetune.probe`)."""
        x, y, w = self.features["train"], self.train.labels, self.train.weights
        if self.options.rc_augment:
            x, y = np.vstack([x, self.features["train_rc"]]), np.concatenate([y, y])
            w = None if w is None else np.concatenate([w, w])
        weight = self.model.score.weight

        def set_head(coef: np.ndarray) -> None:
            with torch.no_grad():
                weight.copy_(torch.as_tensor(coef, dtype=weight.dtype))

        def valid_score(coef: np.ndarray) -> float:
            assert self.valid is not None and self.metric is not None
            set_head(coef)
            outputs = outputs_of(self.task, torch.as_tensor(self.valid_logits())).numpy()
            keep = (
                np.ones(len(self.valid), bool) if self.valid.metric_mask is None else self.valid.metric_mask
            )
            return float(self.metric(self.valid.labels[keep], outputs[keep]))

        has_valid = self.valid is not None and self.metric is not None
        fitted = fit_logistic_probe(
            self.task, x, y, weights=w, class_weights=self.options.class_weights,
            valid_score=valid_score if has_valid else None, higher_is_better=self.higher_is_better,
        )  # fmt: skip
        set_head(fitted.coef)
        self.probe_fit = fitted.to_json()

    # ---------------------------------------------------------------- checkpoints

    def state_json(self) -> dict[str, Any]:
        return {
            "step": self.step, "best_step": self.best_step, "best_score": self.best_score,
            "bad_evals": self.bad_evals, "plateau_bad": self.plateau_bad, "plateau_scale": self.plateau_scale,
            "stopped_early": self.stopped_early, "history": self.history,
            "options": self.options.to_json(), "task": self.task.to_json(), "fingerprint": self.fingerprint,
        }  # fmt: skip

    def restore(self, out: Path, saved: dict[str, Any]) -> None:
        """Continue from the checkpoint in ``out`` whose loop state is ``saved``."""
        load_fit_state(out, self.model, self.optimizer)
        self.step, self.best_step = int(saved["step"]), int(saved["best_step"])
        self.best_score = float(saved["best_score"])
        self.bad_evals, self.plateau_bad = int(saved["bad_evals"]), int(saved["plateau_bad"])
        self.plateau_scale = float(saved["plateau_scale"])
        self.stopped_early = bool(saved["stopped_early"])
        self.history = list(saved["history"])
