"""The training options of ``hexamer finetune``: every :class:`~hexamer.finetune.options.FitOptions`
setting, declared once as an option group (:mod:`hexamer.cli.option_groups`) and handed to the
command as one :class:`FitValues`.

Every number is range-checked by the parser (the same ranges ``FitOptions`` enforces), so a bad
value is a usage error before anything is read; :meth:`FitValues.options` builds the
``FitOptions`` (``ValueError`` for what only the combination can tell, e.g. ``--epochs`` with
``--steps``). An option left out keeps ``FitOptions``' default, which may depend on the method
(docs/finetune.md, "Defaults").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

import typer

from hexamer.cli.option_groups import option_group

__all__ = ["FitValues", "fit_options"]

TRAINING = "Training"
LORA = "LoRA"


def _opt(help_text: str, panel: str = TRAINING, *names: str, **kw: Any) -> Any:
    return typer.Option(*names, help=help_text, rich_help_panel=panel, **kw)


def _above_zero(value: float | None) -> float | None:
    if value is not None and value <= 0:
        raise typer.BadParameter(f"{value} is not > 0")
    return value


def _below_one(value: float | None) -> float | None:
    if value is not None and value >= 1:
        raise typer.BadParameter(f"{value} is not < 1")
    return value


def _names(text: str | None) -> tuple[str, ...]:
    return tuple(p.strip() for p in (text or "").split(",") if p.strip())


Method = Annotated[Literal["full", "lora", "probe"], _opt("full fine-tuning, LoRA, or a linear probe.")]
Epochs = Annotated[int | None, _opt("Epochs (default 10).", min=1, max=100_000)]
Steps = Annotated[int | None, _opt("Optimizer steps (instead of --epochs).", min=1, max=2**31)]
Batch = Annotated[int | None, _opt("Rows per micro-batch (default 16).", min=1, max=1_000_000)]
GradAccum = Annotated[int | None, _opt("Micro-batches per optimizer step (default 1).", min=1, max=100_000)]
Lr = Annotated[
    float | None, _opt("Peak learning rate (default: per method).", min=0.0, max=1.0, callback=_above_zero)
]
HeadLr = Annotated[
    float | None,
    _opt(
        "Learning rate of the new head (default: per method; full: 10x --lr).",
        min=0.0,
        max=1.0,
        callback=_above_zero,
    ),
]
WeightDecay = Annotated[
    float | None, _opt("AdamW weight decay on matrices (default 0.01).", min=0.0, max=10.0)
]
Warmup = Annotated[float | None, _opt("Warm-up, a fraction of the steps (default 0.05).", min=0.0, max=1.0)]
Schedule = Annotated[
    Literal["cosine", "wsd", "constant", "plateau"] | None,
    _opt("Learning-rate schedule after warm-up (default cosine)."),
]
MinLr = Annotated[
    float | None, _opt("Floor of the schedule, a fraction of --lr (default 0).", min=0.0, max=1.0)
]
GradNorm = Annotated[
    float | None, _opt("Gradient clipping norm (default 1.0).", min=0.0, max=1e9, callback=_above_zero)
]
PlateauFactor = Annotated[
    float | None,
    _opt("plateau: multiply the rate by this after --plateau-patience bad evaluations (default 0.5).",
         min=0.0, max=1.0, callback=lambda v: _below_one(_above_zero(v))),
]  # fmt: skip
PlateauPatience = Annotated[
    int | None,
    _opt(
        "plateau: evaluations without improvement before the cut (default 3: torch's patience 2, "
        "the Malinois recipe's).",
        min=1,
        max=100_000,
    ),
]
CheckpointEvery = Annotated[
    int | None, _opt("Steps between resumable checkpoints (default: at each evaluation).", min=1)
]
EvalBatch = Annotated[
    int | None, _opt("Rows per forward when evaluating (default 32).", min=1, max=1_000_000)
]
Patience = Annotated[
    int | None, _opt("Stop after this many evaluations without improvement.", min=1, max=100_000)
]
EvalEvery = Annotated[int | None, _opt("Steps between evaluations (default: once per epoch).", min=1)]
Loss = Annotated[
    Literal["mse", "huber", "pearson_huber", "ce", "bce"] | None, _opt("Training loss (default: the task's).")
]
HuberDelta = Annotated[
    float | None, _opt("Huber delta (default 1.0).", min=0.0, max=1e9, callback=_above_zero)
]
PearsonLambda = Annotated[
    float | None,
    _opt("Weight of Huber in pearson_huber (default 0.2, the DREAM recipe's).", min=0.0, max=1e9),
]
ClassWeights = Annotated[
    str | None, _opt("Comma-separated loss weight per class (ce) or positive weight per label (bce).")
]
Pooling = Annotated[
    Literal["last", "mean"] | None,
    _opt("Head input: last (the </dna> token, as transformers) or mean (DNA tokens); default mean."),
]
Layer = Annotated[
    int | None,
    _opt("Hidden layer the head reads (0 = embeddings, -1 = last; default -1).", min=-100_000, max=100_000),
]
RcAugment = Annotated[
    bool | None, _opt("Train on a random strand of each row (reverse-complement augmentation).")
]
ShiftAugment = Annotated[
    bool | None, _opt("Cut 0-5 bases from the start of each training row (every 6-mer phase of a motif).")
]
RcAverage = Annotated[bool | None, _opt("Average validation and predictions over both strands.")]
Bf16 = Annotated[bool | None, _opt("bf16 mixed precision (GPU; CPUs with AVX512_BF16/AMX).")]
GradCkpt = Annotated[bool | None, _opt("Recompute decoder layers in the backward pass (less memory).")]
ProbeRidge = Annotated[
    float | None, _opt("Regression probe: closed-form ridge head with this penalty.", min=0.0, max=1e12)
]
ProbeLogistic = Annotated[
    bool | None,
    _opt("Classification probe: scikit-learn logistic regression (lbfgs), C chosen on validation."),
]
AdamBeta2 = Annotated[
    float | None,
    _opt(
        "AdamW beta2 (default 0.999; the official recipes use 0.95).", min=0.0, max=1.0, callback=_below_one
    ),
]
LoraRank = Annotated[int | None, _opt("LoRA rank (default 8).", LORA, min=1, max=4096)]
LoraAlpha = Annotated[
    float | None,
    _opt(
        "LoRA alpha; the update is scaled by alpha/rank (default 16).",
        LORA,
        min=0.0,
        max=1e9,
        callback=_above_zero,
    ),
]
LoraDropout = Annotated[
    float | None,
    _opt("Dropout on the adapter input (default 0).", LORA, min=0.0, max=1.0, callback=_below_one),
]
LoraTargets = Annotated[
    str | None, _opt("Projections to adapt, comma-separated (default q_proj,k_proj,v_proj,o_proj).", LORA)
]


@dataclass(frozen=True)
class FitValues:
    """The training options as given on the command line (None: the default)."""

    method: str
    epochs: int | None
    steps: int | None
    values: dict[str, Any]
    lora: dict[str, Any]

    def options(self, seed: int, device: str) -> Any:
        """The run's ``FitOptions`` (a usage error for --epochs with --steps; ``ValueError`` for
        other bad combinations)."""
        from hexamer.finetune.options import FitOptions, LoraOptions

        if self.epochs is not None and self.steps is not None:
            raise typer.BadParameter("give --epochs or --steps, not both")
        kw = {k: v for k, v in self.values.items() if v is not None}
        if "class_weights" in kw:
            kw["class_weights"] = _floats(kw["class_weights"], "--class-weights")
        lora = {k: v for k, v in self.lora.items() if v is not None}
        if "targets" in lora:
            lora["targets"] = _names(lora["targets"])
        if lora:
            kw["lora"] = LoraOptions(**lora)
        if self.epochs is not None:
            kw["epochs"] = self.epochs
        return FitOptions(method=self.method, steps=self.steps, seed=seed, device=device, **kw)


def _floats(text: str, option: str) -> tuple[float, ...]:
    try:
        return tuple(float(p) for p in _names(text))
    except ValueError:
        raise ValueError(f"{option} takes comma-separated numbers, got {text!r}") from None


_LORA_KEYS = {
    "lora_rank": "rank",
    "lora_alpha": "alpha",
    "lora_dropout": "dropout",
    "lora_targets": "targets",
}


def _build(method: str, epochs: int | None, steps: int | None, **values: Any) -> FitValues:
    lora = {_LORA_KEYS[k]: values.pop(k) for k in list(values) if k in _LORA_KEYS}
    return FitValues(method, epochs, steps, values, lora)


#: ``hexamer finetune``'s training options, handed to it as one ``fit`` (a :class:`FitValues`)
fit_options = option_group(
    "fit",
    (
        ("method", Method, "full"),
        ("epochs", Epochs, None),
        ("steps", Steps, None),
        ("batch_size", Batch, None),
        ("grad_accum", GradAccum, None),
        ("lr", Lr, None),
        ("head_lr", HeadLr, None),
        ("weight_decay", WeightDecay, None),
        ("warmup", Warmup, None),
        ("schedule", Schedule, None),
        ("min_lr_ratio", MinLr, None),
        ("max_grad_norm", GradNorm, None),
        ("plateau_factor", PlateauFactor, None),
        ("plateau_patience", PlateauPatience, None),
        ("patience", Patience, None),
        ("checkpoint_every", CheckpointEvery, None),
        ("eval_batch_size", EvalBatch, None),
        ("eval_every", EvalEvery, None),
        ("loss", Loss, None),
        ("huber_delta", HuberDelta, None),
        ("pearson_lambda", PearsonLambda, None),
        ("class_weights", ClassWeights, None),
        ("pooling", Pooling, None),
        ("layer", Layer, None),
        ("rc_augment", RcAugment, None),
        ("shift_augment", ShiftAugment, None),
        ("rc_average", RcAverage, None),
        ("bf16", Bf16, None),
        ("grad_checkpointing", GradCkpt, None),
        ("probe_ridge", ProbeRidge, None),
        ("probe_logistic", ProbeLogistic, None),
        ("adam_beta2", AdamBeta2, None),
        ("lora_rank", LoraRank, None),
        ("lora_alpha", LoraAlpha, None),
        ("lora_dropout", LoraDropout, None),
        ("lora_targets", LoraTargets, None),
    ),
    _build,
)
