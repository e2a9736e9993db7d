"""`FitOptions`: every setting of a fine-tuning run, range-checked when built.

Torch-free, so a command line can build and check them without loading torch. A run's options
are written into its checkpoints, so a resumed run can refuse options that would
make it a different run (the resume test is "the same final weights as an uninterrupted run").
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

__all__ = [
    "DEFAULT_HEAD_LR_RATIO",
    "DEFAULT_LR",
    "LARGE_MODEL_LR",
    "LORA_TARGETS",
    "LOSSES",
    "METHODS",
    "POOLINGS",
    "SCHEDULES",
    "SMALL_HIDDEN",
    "FitOptions",
    "LoraOptions",
]

METHODS: tuple[str, ...] = ("full", "lora", "probe")
SCHEDULES: tuple[str, ...] = ("cosine", "wsd", "constant", "plateau")
#: how the head reads the hidden states (see :mod:`hexamer.finetune.head`)
POOLINGS: tuple[str, ...] = ("last", "mean")
#: the training losses (see :mod:`hexamer.finetune.losses`)
LOSSES: tuple[str, ...] = ("mse", "huber", "pearson_huber", "ce", "bce")
#: the projections LoRA may adapt (see :mod:`hexamer.finetune.lora`)
LORA_TARGETS: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
#: the peak learning rate of each method when ``lr`` is not given, for a model of hidden size up
#: to :data:`SMALL_HIDDEN` (measured on the built-in demo model: docs/finetune.md, "Defaults")
DEFAULT_LR: dict[str, float] = {"full": 1e-3, "lora": 3e-3, "probe": 1e-2}
#: ... and for a larger model (Carbon-500M and up): the official recipes' full fine-tuning rate
#: (DREAM, 2e-5), ten times that for LoRA's adapters; a probe's head alone is as fast as on a small model
LARGE_MODEL_LR: dict[str, float] = {"full": 2e-5, "lora": 2e-4, "probe": 1e-2}
SMALL_HIDDEN = 512
#: ``head_lr / lr`` when ``head_lr`` is not given: the head starts from random weights while the
#: backbone is pretrained, so under full fine-tuning it learns faster than the weights it reads
DEFAULT_HEAD_LR_RATIO: dict[str, float] = {"full": 10.0, "lora": 1.0, "probe": 1.0}


def _int(name: str, value: Any, lo: int, hi: int = 2**31) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {value!r}")


def _float(
    name: str, value: Any, lo: float, hi: float, *, lo_open: bool = False, hi_open: bool = False
) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok:
        ok = (value > lo if lo_open else value >= lo) and (value < hi if hi_open else value <= hi)
    if not ok:
        left, right = "(" if lo_open else "[", ")" if hi_open else "]"
        raise ValueError(f"{name} must be a number in {left}{lo}, {hi}{right}, got {value!r}")


@dataclass(frozen=True)
class LoraOptions:
    """Rank ``rank``, scale ``alpha / rank``, input ``dropout``, on the projections ``targets``."""

    rank: int = 8
    alpha: float = 16.0
    dropout: float = 0.0
    targets: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")

    def __post_init__(self) -> None:
        object.__setattr__(self, "targets", tuple(self.targets))
        if isinstance(self.rank, bool) or not isinstance(self.rank, int) or not 1 <= self.rank <= 4096:
            raise ValueError(f"LoRA rank must be an integer in [1, 4096], got {self.rank!r}")
        if not (math.isfinite(self.alpha) and self.alpha > 0):
            raise ValueError(f"LoRA alpha must be > 0, got {self.alpha!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"LoRA dropout must be in [0, 1), got {self.dropout!r}")
        bad = [t for t in self.targets if t not in LORA_TARGETS]
        if bad or not self.targets or len(set(self.targets)) != len(self.targets):
            raise ValueError(
                f"LoRA targets must be distinct names among {', '.join(LORA_TARGETS)}, got {list(self.targets)}"
            )

    @property
    def scaling(self) -> float:
        return self.alpha / self.rank


@dataclass(frozen=True)
class FitOptions:
    """How :func:`hexamer.finetune.fit` trains.

    ``method``: ``full`` (every weight), ``lora`` (adapters + head, :class:`LoraOptions` in
    ``lora``), ``probe`` (frozen backbone: features computed once, then only the head).
    ``lr`` None = the method's default for the model's size (:data:`DEFAULT_LR`,
    :data:`LARGE_MODEL_LR`); ``head_lr`` (the new ``score`` head's rate) None = ``lr`` times
    :data:`DEFAULT_HEAD_LR_RATIO`; :meth:`resolved` fills both once the model is known (``fit``
    does, and stores the numbers in its checkpoint).
    ``shift_augment``: cut 0..k-1 bases (k = 6) from the start of each training row, drawn from
    the seed, so a motif is seen in every phase of the non-overlapping k-mers (None: on for
    ``full`` and ``lora``, off for ``probe``, whose features are computed once).
    ``steps`` (optimizer steps) overrides ``epochs`` when set. ``warmup`` is a fraction of the
    steps. ``schedule``: ``cosine`` / ``wsd`` / ``constant`` after warm-up, or ``plateau``
    (multiply the learning rate by ``plateau_factor`` after ``plateau_patience`` evaluations
    without improvement). ``loss`` None = the task's default (mse / ce / bce).
    ``class_weights``: one per class (ce) or per label (bce: the positive weight).
    ``patience``: stop after that many evaluations without improvement (None: never).
    ``eval_every``: steps between evaluations on the validation set (None: once per epoch);
    ``checkpoint_every``: steps between resumable checkpoints (None: at each evaluation).
    ``probe_ridge``: for a regression probe with mse, solve the head in closed form with this
    ridge penalty instead of training it. ``probe_logistic``: for a classification probe (ce or
    bce), fit the head as scikit-learn's L2 logistic regression (lbfgs, no intercept, as the
    bias-free ``score``) with C chosen on the validation set by the selection metric.
    ``adam_beta2``: AdamW's second-moment decay (the official recipes use 0.95).
    """

    method: str = "full"
    epochs: int = 10
    steps: int | None = None
    batch_size: int = 16
    lr: float | None = None
    head_lr: float | None = None
    weight_decay: float = 0.01
    warmup: float = 0.05
    schedule: str = "cosine"
    min_lr_ratio: float = 0.0
    plateau_factor: float = 0.5
    plateau_patience: int = 3
    grad_accum: int = 1
    max_grad_norm: float | None = 1.0
    grad_checkpointing: bool = False
    bf16: bool = False
    seed: int = 0
    loss: str | None = None
    class_weights: tuple[float, ...] | None = None
    huber_delta: float = 1.0
    pearson_lambda: float = 0.2
    rc_augment: bool = False
    rc_average: bool = False
    shift_augment: bool | None = None
    patience: int | None = None
    eval_every: int | None = None
    checkpoint_every: int | None = None
    eval_batch_size: int = 32
    pooling: str = "mean"
    layer: int = -1
    lora: LoraOptions = field(default_factory=LoraOptions)
    probe_ridge: float | None = None
    probe_logistic: bool = False
    adam_beta2: float = 0.999
    device: str = "cpu"

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}, got {self.method!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}")
        if self.shift_augment is None:  # on where each step reads the rows afresh
            object.__setattr__(self, "shift_augment", self.method != "probe")
        if self.shift_augment and self.method == "probe":
            raise ValueError(
                "shift_augment cuts rows afresh at each step; a probe computes its features once"
            )
        if self.probe_logistic and (self.method != "probe" or self.probe_ridge is not None):
            raise ValueError("probe_logistic is for method='probe', without probe_ridge")
        if self.pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, got {self.pooling!r}")
        _int("epochs", self.epochs, 1, 100_000)
        for name in ("steps", "patience", "eval_every", "checkpoint_every"):
            if getattr(self, name) is not None:
                _int(name, getattr(self, name), 1)
        _int("batch_size", self.batch_size, 1, 1_000_000)
        _int("eval_batch_size", self.eval_batch_size, 1, 1_000_000)
        _int("grad_accum", self.grad_accum, 1, 100_000)
        _int("plateau_patience", self.plateau_patience, 1, 100_000)
        _int("seed", self.seed, 0, 2**63 - 1)
        _int("layer", self.layer, -100_000, 100_000)
        for name in ("lr", "head_lr"):
            if getattr(self, name) is not None:
                _float(name, getattr(self, name), 0.0, 1.0, lo_open=True)
        _float("weight_decay", self.weight_decay, 0.0, 10.0)
        _float("warmup", self.warmup, 0.0, 1.0)
        _float("min_lr_ratio", self.min_lr_ratio, 0.0, 1.0)
        _float("plateau_factor", self.plateau_factor, 0.0, 1.0, lo_open=True, hi_open=True)
        _float("huber_delta", self.huber_delta, 0.0, 1e9, lo_open=True)
        _float("pearson_lambda", self.pearson_lambda, 0.0, 1e9)
        _float("adam_beta2", self.adam_beta2, 0.0, 1.0, hi_open=True)
        if self.max_grad_norm is not None:
            _float("max_grad_norm", self.max_grad_norm, 0.0, 1e9, lo_open=True)
        if self.probe_ridge is not None:
            _float("probe_ridge", self.probe_ridge, 0.0, 1e12)
        if self.class_weights is not None:
            object.__setattr__(self, "class_weights", tuple(self.class_weights))
            if not self.class_weights:
                raise ValueError("class_weights is empty")
            for w in self.class_weights:
                _float("each class weight", w, 0.0, 1e9, lo_open=True)
        if not isinstance(self.lora, LoraOptions):
            raise ValueError(f"lora must be a LoraOptions, got {type(self.lora).__name__}")

    def resolved(self, hidden_size: int) -> FitOptions:
        """These options with ``lr`` and ``head_lr`` set for a model of ``hidden_size`` (the
        defaults where they were None; given values stay)."""
        lr = self.lr
        if lr is None:
            lr = (DEFAULT_LR if hidden_size <= SMALL_HIDDEN else LARGE_MODEL_LR)[self.method]
        head_lr = self.head_lr
        if head_lr is None:
            head_lr = min(1.0, lr * DEFAULT_HEAD_LR_RATIO[self.method])
        return replace(self, lr=lr, head_lr=head_lr)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["lora"] = {**asdict(self.lora), "targets": list(self.lora.targets)}
        if self.class_weights is not None:
            d["class_weights"] = list(self.class_weights)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> FitOptions:
        d = dict(d)
        lora = d.pop("lora", None)
        cw = d.pop("class_weights", None)
        return cls(
            **d,
            lora=LoraOptions(**{**lora, "targets": tuple(lora["targets"])}) if lora else LoraOptions(),
            class_weights=None if cw is None else tuple(cw),
        )
