"""``TrainConfig``: every option of ``hexamer train`` in one validated dataclass.

One source of truth for the Python API, the JSON file a run is described by (and that a checkpoint
stores, so ``--resume`` can check that it continues the same run) and the CLI, whose options are
generated from the fields below (their ``help`` metadata is the option's help text).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = ["ARCHITECTURE_KEYS", "INIT_SHAPES", "RESUME_KEYS", "TrainConfig"]

#: ``--init`` values that build a new model; anything else is a model folder to fine-tune.
INIT_SHAPES = ("tiny", "500m-shape")

#: Fields that shape a new model (a fine-tune takes them from its folder instead).
ARCHITECTURE_KEYS = (
    "hidden_size",
    "intermediate_size",
    "num_layers",
    "num_heads",
    "num_kv_heads",
    "context_length",
    "rope_theta",
    "tie_embeddings",
)

#: Fields that define the optimisation trajectory: a resumed run must agree on all of them.
RESUME_KEYS = (
    "data",
    "val_data",
    "val_fraction",
    "init",
    "bpe",
    *ARCHITECTURE_KEYS,
    "kmer_init",
    "copy_circuit",
    "window_bp",
    "batch_size",
    "grad_accum",
    "steps",
    "objective",
    "fns_start",
    "fns_weight",
    "fns_lr_scale",
    "lr",
    "min_lr_ratio",
    "warmup_steps",
    "schedule",
    "decay_fraction",
    "weight_decay",
    "beta1",
    "beta2",
    "eps",
    "max_grad_norm",
    "rc_prob",
    "tag",
    "file_tags",
    "tag_dropout",
    "seed",
)


def _opt(help_text: str, default: Any = None) -> Any:
    """An immutable-default field carrying its CLI help text."""
    return field(default=default, metadata={"help": help_text})


@dataclass
class TrainConfig:
    """Everything a training run needs; see ``docs/training.md`` for the recipe behind the defaults."""

    # ---- data
    data: list[str] = field(
        default_factory=list,
        metadata={"help": "Training sequence files (FASTA/FASTQ, plain or gzip; .txt; Parquet/TSV/CSV)."},
    )
    val_data: list[str] = field(
        default_factory=list, metadata={"help": "Extra held-out files, evaluated whole."}
    )
    val_fraction: float = _opt("Hold out the last fraction of every training sequence for validation.", 0.1)
    window_bp: int = _opt("Bases per training window (random start, any frame).", 6000)
    rc_prob: float = _opt("Probability of reverse-complementing a training window (0 = off).", 0.5)
    tag: str = _opt("Metadata tag written before <dna> (plain text, e.g. '<mammalian_species>').", "")
    file_tags: dict[str, str] = field(
        default_factory=dict, metadata={"help": "Per-file tags: data path -> tag (overrides --tag)."}
    )
    tag_dropout: float = _opt("Probability of dropping the tag of a training window.", 0.0)
    # ---- model
    init: str = _opt(
        "'tiny' or '500m-shape' (new random model) or a Carbon-format folder to fine-tune.", "tiny"
    )
    bpe: Literal["auto", "tiny", "qwen3"] = _opt(
        "Text vocabulary of a new model: auto = tiny for 'tiny', the real Qwen3 BPE for '500m-shape'.", "auto"
    )
    hidden_size: int | None = _opt("New model: hidden size (overrides the --init shape).")
    intermediate_size: int | None = _opt("New model: SwiGLU FFN size.")
    num_layers: int | None = _opt("New model: decoder layers.")
    num_heads: int | None = _opt("New model: attention heads.")
    num_kv_heads: int | None = _opt("New model: key/value heads (grouped-query attention).")
    context_length: int | None = _opt("New model: context in tokens (max_position_embeddings).")
    rope_theta: float | None = _opt("New model: RoPE base frequency.")
    tie_embeddings: bool | None = _opt("New model: tie input and output embeddings.")
    kmer_init: Literal["compositional", "random"] = _opt(
        "New model: k-mer embedding rows start as sums of per-position base vectors, or random.",
        "compositional",
    )
    copy_circuit: bool = _opt(
        "New model: layers 0-1 start as a copy circuit (previous-token heads and an induction head), "
        "kept fixed while the rest trains; needs --no-tie-embeddings.",
        False,
    )
    # ---- optimisation
    steps: int = _opt("Optimizer steps of the whole schedule.", 1000)
    stop_at: int | None = _opt("Stop (with a checkpoint) after this step; the schedule still spans --steps.")
    batch_size: int = _opt("Windows per micro-batch.", 8)
    grad_accum: int = _opt("Micro-batches per optimizer step.", 1)
    objective: Literal["staged", "ce", "fns", "mix"] = _opt(
        "staged = token CE then FNS (from --fns-start); ce; fns; mix = (1-w)*CE + w*FNS.", "staged"
    )
    fns_start: float = _opt("staged: fraction of --steps after which FNS replaces CE.", 0.5)
    fns_weight: float = _opt("mix: weight w of the FNS term.", 0.5)
    fns_lr_scale: float = _opt("Learning-rate multiplier while FNS is on (the Carbon recipe lowers it).", 1.0)
    lr: float = _opt("Peak learning rate (AdamW).", 1e-3)
    min_lr_ratio: float = _opt("Final learning rate as a fraction of --lr.", 0.1)
    warmup_steps: int = _opt("Linear warm-up steps (at most --steps).", 100)
    schedule: Literal["cosine", "wsd", "constant"] = _opt(
        "cosine: warm-up then cosine decay; wsd: warm-up, stable, linear decay; constant.", "cosine"
    )
    decay_fraction: float = _opt("wsd: fraction of --steps spent in the final decay.", 0.2)
    weight_decay: float = _opt("AdamW weight decay (matrices only; norms are not decayed).", 0.1)
    beta1: float = _opt("AdamW beta1.", 0.9)
    beta2: float = _opt("AdamW beta2.", 0.95)
    eps: float = _opt("AdamW epsilon.", 1e-8)
    max_grad_norm: float = _opt("Clip the gradient norm (0 = off).", 1.0)
    seed: int = _opt("Seed of the initial weights and of every batch (batch s is a function of seed, s).", 0)
    # ---- evaluation, checkpoints, runtime
    output_dir: str = _opt("Run folder: checkpoint-*/, final/, metrics.jsonl.", "hexamer-train")
    eval_every: int = _opt("Validate every N steps (0 = only at the end).", 200)
    val_max_bp: int = _opt("Held-out bases evaluated per validation (0 = all).", 200_000)
    eval_batch_size: int = _opt("Windows per validation batch.", 8)
    log_every: int = _opt("Record training loss every N steps.", 10)
    save_every: int = _opt("Checkpoint every N steps (0 = only at the end).", 500)
    keep_checkpoints: int = _opt("Checkpoints to keep (oldest are deleted).", 2)
    save_dtype: Literal["float32", "bfloat16", "float16"] = _opt(
        "Weight dtype of the final model.", "float32"
    )
    device: str = _opt("auto (cuda if present), cpu, cuda, cuda:1 ...", "auto")
    precision: Literal["auto", "fp32", "bf16"] = _opt(
        "bf16 autocast: auto = on for CUDA, off on CPU.", "auto"
    )
    threads: int | None = _opt("CPU threads for torch (default: torch's choice).")
    resume: bool = _opt("Continue from the latest checkpoint in --output-dir.", False)
    resume_from: str | None = _opt("Continue from this checkpoint folder.")

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> TrainConfig:
        """Build and validate; unknown keys are an error (a typo must not silently do nothing)."""
        if not isinstance(raw, dict):
            raise ValueError(f"a training config must be a JSON object, got {type(raw).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(raw) - names)
        if unknown:
            raise ValueError(f"unknown training option(s): {', '.join(unknown)}")
        config = cls(**raw)
        config.validate()
        return config

    @classmethod
    def from_json(cls, path: str | os.PathLike[str]) -> TrainConfig:
        """Read a JSON file written by :meth:`to_json` (or by hand)."""
        p = Path(path)
        try:
            raw = json.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise FileNotFoundError(f"training config not found: {p}") from None
        except json.JSONDecodeError as exc:
            raise ValueError(f"{p} is not valid JSON: {exc}") from None
        try:
            return cls.from_dict(raw)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{p}: {exc}") from None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self, path: str | os.PathLike[str] | None = None) -> str:
        text = json.dumps(self.to_dict(), indent=2) + "\n"
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    def replace(self, **changes: Any) -> TrainConfig:
        """A validated copy with some fields changed."""
        new = dataclasses.replace(self, **changes)
        new.validate()
        return new

    # ------------------------------------------------------------------ derived values
    @property
    def new_model(self) -> bool:
        """True when ``init`` names a shape (build a random model) rather than a folder."""
        return self.init in INIT_SHAPES

    @property
    def fns_start_step(self) -> int:
        """First step (0-based) trained with FNS by the staged objective."""
        return round(self.fns_start * self.steps)

    # ------------------------------------------------------------------ validation
    def validate(self) -> None:
        """Raise ``ValueError`` naming the first bad option."""
        _choice("objective", self.objective, ("staged", "ce", "fns", "mix"))
        _choice("schedule", self.schedule, ("cosine", "wsd", "constant"))
        _choice("precision", self.precision, ("auto", "fp32", "bf16"))
        _choice("bpe", self.bpe, ("auto", "tiny", "qwen3"))
        _choice("save_dtype", self.save_dtype, ("float32", "bfloat16", "float16"))
        _choice("kmer_init", self.kmer_init, ("compositional", "random"))
        for name in ("data", "val_data"):
            value = getattr(self, name)
            if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                raise ValueError(f"{name} must be a list of file paths, got {value!r}")
        if not isinstance(self.file_tags, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in self.file_tags.items()
        ):
            raise ValueError(f"file_tags must map file paths to tag strings, got {self.file_tags!r}")
        stray = sorted(set(self.file_tags) - set(self.data) - set(self.val_data))
        if stray:
            raise ValueError(f"file_tags names file(s) that are not in data/val_data: {', '.join(stray)}")
        if not isinstance(self.init, str) or not self.init:
            raise ValueError("init must be 'tiny', '500m-shape' or a model folder")
        if not self.new_model and not Path(self.init).is_dir():
            raise ValueError(
                f"unknown init {self.init!r}: use {' or '.join(INIT_SHAPES)} for a new model, "
                "or the path of a Carbon-format model folder to fine-tune"
            )
        if not self.new_model:
            given = [n for n in ARCHITECTURE_KEYS if getattr(self, n) is not None]
            if given:
                raise ValueError(
                    f"{', '.join(given)} only apply to a new model (--init {' or '.join(INIT_SHAPES)}); "
                    f"{self.init!r} is a folder to fine-tune"
                )
            if self.bpe != "auto":
                raise ValueError("bpe only applies to a new model; a fine-tuned folder keeps its tokenizer")
            if self.copy_circuit:
                raise ValueError("copy_circuit only applies to a new model; a folder keeps its weights")
        if self.copy_circuit and self.tie_embeddings is not False:
            raise ValueError("copy_circuit needs an untied LM head: add --no-tie-embeddings")
        for name in (
            "window_bp",
            "batch_size",
            "grad_accum",
            "steps",
            "eval_batch_size",
            "log_every",
            "keep_checkpoints",
        ):
            _positive_int(name, getattr(self, name))
        for name in ("hidden_size", "intermediate_size", "num_layers", "num_heads", "num_kv_heads"):
            if getattr(self, name) is not None:
                _positive_int(name, getattr(self, name))
        if self.context_length is not None:
            _positive_int("context_length", self.context_length)
        for name in ("eval_every", "save_every", "warmup_steps", "val_max_bp", "seed"):
            _nonneg_int(name, getattr(self, name))
        if self.threads is not None:
            _positive_int("threads", self.threads)
        if self.stop_at is not None:
            _positive_int("stop_at", self.stop_at)
            if self.stop_at > self.steps:
                raise ValueError(f"stop_at ({self.stop_at}) must not exceed steps ({self.steps})")
        for name in ("val_fraction", "rc_prob", "tag_dropout", "fns_start", "fns_weight", "min_lr_ratio"):
            _unit(name, getattr(self, name))
        if self.val_fraction >= 1:
            raise ValueError("val_fraction must be below 1 (something must be left to train on)")
        _unit("decay_fraction", self.decay_fraction)
        for name in ("lr", "fns_lr_scale", "beta1", "beta2", "eps", "weight_decay", "max_grad_norm"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
                raise ValueError(f"{name} must be a number, got {value!r}")
            if value < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")
        if self.lr <= 0 or self.fns_lr_scale <= 0:
            raise ValueError("lr and fns_lr_scale must be > 0")
        if not (self.beta1 < 1 and self.beta2 < 1):
            raise ValueError("beta1 and beta2 must be below 1")
        if self.rope_theta is not None and self.rope_theta <= 0:
            raise ValueError(f"rope_theta must be > 0, got {self.rope_theta}")
        if not isinstance(self.output_dir, str) or not self.output_dir:
            raise ValueError("output_dir must be a folder path")
        if self.resume and self.resume_from:
            raise ValueError("give resume or resume_from, not both")


def _choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")


def _positive_int(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _nonneg_int(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")


def _unit(name: str, value: Any) -> None:
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value <= 1:
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
