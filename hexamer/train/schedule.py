"""Optimizer and schedules: AdamW, the learning-rate curve and the CE -> FNS objective switch.

Every quantity is a pure function of the step number, so a resumed run needs no scheduler state:
it recomputes the same learning rate and objective weight for the step it continues from.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from hexamer.train.config import TrainConfig

__all__ = ["build_optimizer", "fns_weight_at", "lr_at", "lr_factor"]


def lr_factor(
    step: int,
    *,
    steps: int,
    warmup_steps: int,
    schedule: str = "cosine",
    min_lr_ratio: float = 0.1,
    decay_fraction: float = 0.2,
) -> float:
    """Learning-rate multiplier at 0-based ``step`` (1.0 = peak).

    Linear warm-up over ``warmup_steps`` (capped at ``steps``; step 0 already trains, at
    ``1/warmup``), then:
    ``cosine`` decays to ``min_lr_ratio`` at the last step; ``wsd`` (warm-up, stable, decay) holds
    the peak and decays linearly to ``min_lr_ratio`` over the last ``decay_fraction`` of the steps;
    ``constant`` holds the peak.
    """
    warmup_steps = min(warmup_steps, steps)
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if schedule == "constant":
        return 1.0
    last = steps - 1
    if schedule == "cosine":
        span = last - warmup_steps
        progress = 1.0 if span <= 0 else (step - warmup_steps) / span
        return min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
    if schedule == "wsd":
        n_decay = round(decay_fraction * steps)
        decay_start = max(warmup_steps, steps - n_decay)
        if step < decay_start or n_decay == 0:
            return 1.0
        span = last - decay_start
        progress = 1.0 if span <= 0 else (step - decay_start) / span
        return 1.0 - (1 - min_lr_ratio) * min(progress, 1.0)
    raise ValueError(f"unknown schedule {schedule!r}")


def fns_weight_at(config: TrainConfig, step: int) -> float:
    """Weight of the FNS term at ``step``; the token-CE term gets ``1 - weight``."""
    if config.objective == "ce":
        return 0.0
    if config.objective == "fns":
        return 1.0
    if config.objective == "mix":
        return config.fns_weight
    return 1.0 if step >= config.fns_start_step else 0.0


def lr_at(config: TrainConfig, step: int) -> float:
    """Learning rate at ``step``: peak x schedule factor, x ``fns_lr_scale`` while FNS is on."""
    factor = lr_factor(
        step,
        steps=config.steps,
        warmup_steps=config.warmup_steps,
        schedule=config.schedule,
        min_lr_ratio=config.min_lr_ratio,
        decay_fraction=config.decay_fraction,
    )
    scale = config.fns_lr_scale if fns_weight_at(config, step) > 0 else 1.0
    return config.lr * factor * scale


def build_optimizer(model: nn.Module, config: TrainConfig) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices (embeddings included) and none on norm weights/biases.

    Parameter order is the model's, so optimizer state saved by name maps back one to one.
    """
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    groups = [
        {"params": decay, "weight_decay": config.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(
        groups, lr=config.lr, betas=(config.beta1, config.beta2), eps=config.eps, foreach=True
    )
