"""LoRA on hexamer's Llama: low-rank adapters on the attention and MLP projections.

Own code rather than ``peft``: hexamer's decoder is not a ``transformers`` model (``peft`` wraps
those), and hexamer's fast paths replace modules and read projection weights directly, so the
adapter must be a plain module that can be merged back into an ``nn.Linear`` before any of that
runs. The maths and the files are ``peft``'s: ``W x + (alpha / r) B A dropout(x)`` with ``A``
Kaiming-uniform and ``B`` zero at the start, saved as ``adapter_config.json`` +
``adapter_model.safetensors`` under ``peft``'s names for ``LlamaForSequenceClassification``
(``score`` as a module to save), so ``PeftModel.from_pretrained`` loads it on the base model.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from torch import nn

from hexamer.finetune.head import SequenceClassifier
from hexamer.finetune.options import LORA_TARGETS, LoraOptions
from hexamer.train.checkpoint import atomic_folder

__all__ = [
    "ADAPTER_CONFIG",
    "ADAPTER_WEIGHTS",
    "LoraLinear",
    "add_lora",
    "load_adapter",
    "load_adapter_weights",
    "lora_merged",
    "lora_modules",
    "merge_lora",
    "save_adapter",
]

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
_PREFIX = "base_model.model."


class LoraLinear(nn.Module):
    """``base_layer(x) + scaling * lora_B(lora_A(dropout(x)))`` (``peft``'s module names)."""

    def __init__(self, base_layer: nn.Linear, options: LoraOptions, generator: torch.Generator) -> None:
        super().__init__()
        self.base_layer = base_layer
        w = base_layer.weight
        self.lora_A = nn.Linear(
            base_layer.in_features, options.rank, bias=False, dtype=w.dtype, device=w.device
        )
        self.lora_B = nn.Linear(
            options.rank, base_layer.out_features, bias=False, dtype=w.dtype, device=w.device
        )
        self.dropout = nn.Dropout(options.dropout) if options.dropout > 0 else nn.Identity()
        self.scaling = options.scaling
        bound = 1 / math.sqrt(base_layer.in_features)  # kaiming_uniform_(a=sqrt(5)), as nn.Linear and peft
        with torch.no_grad():
            a = torch.rand(self.lora_A.weight.shape, generator=generator) * 2 * bound - bound
            self.lora_A.weight.copy_(a.to(w.dtype))
            self.lora_B.weight.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # the scale applied to the rank-r activations, not the (rows, out) product: the same
        # value up to rounding, one multiply on r columns instead of out_features
        return self.base_layer(x) + self.lora_B(self.lora_A(self.dropout(x)) * self.scaling)

    def merged_weight(self) -> torch.Tensor:
        """``W + scaling * B @ A`` (computed in float32, returned in the weight's dtype), detached."""
        w = self.base_layer.weight
        with torch.no_grad():
            delta = (self.lora_B.weight.float() @ self.lora_A.weight.float()) * self.scaling
            return (w.float() + delta).to(w.dtype)

    def merged(self) -> nn.Linear:
        """The base linear with the adapter folded into its weight."""
        base = self.base_layer
        with torch.no_grad():
            base.weight.copy_(self.merged_weight())
        return base


def _targets(model: SequenceClassifier, names: tuple[str, ...]) -> list[tuple[nn.Module, str]]:
    found = []
    for layer in model.backbone.layers:
        for parent in (layer.self_attn, layer.mlp):
            found.extend((parent, n) for n in names if hasattr(parent, n))
    return found


def add_lora(model: SequenceClassifier, options: LoraOptions, *, seed: int = 0) -> SequenceClassifier:
    """Wrap the target projections of ``model`` in place; freeze the backbone, keep ``score`` trainable."""
    if lora_modules(model):
        raise ValueError("the model already has LoRA adapters")
    gen = torch.Generator().manual_seed(seed)
    for p in model.backbone.parameters():
        p.requires_grad_(False)
    for parent, name in _targets(model, options.targets):
        linear = getattr(parent, name)
        if not isinstance(linear, nn.Linear):
            raise TypeError(f"LoRA needs plain nn.Linear projections, {name} is a {type(linear).__name__}")
        setattr(parent, name, LoraLinear(linear, options, gen))
    model.score.weight.requires_grad_(True)
    model.lora_options = options
    return model


def lora_modules(model: nn.Module) -> dict[str, LoraLinear]:
    """Name -> adapter of every LoRA module in ``model`` (names relative to ``model``)."""
    return {name: m for name, m in model.named_modules() if isinstance(m, LoraLinear)}


def merge_lora(model: SequenceClassifier) -> SequenceClassifier:
    """Fold every adapter into its base weight in place (the result saves as a plain head folder)."""
    for parent, name in _targets(model, LORA_TARGETS):
        module = getattr(parent, name)
        if isinstance(module, LoraLinear):
            setattr(parent, name, module.merged())
    model.lora_options = None
    return model


@contextmanager
def lora_merged(model: SequenceClassifier) -> Iterator[SequenceClassifier]:
    """``model`` with its adapters folded in, inside the block only: each adapted projection is
    swapped for a plain linear holding the merged weight, and the adapters (with their untouched
    base weights) come back on exit. What a checkpoint saves mid-training without disturbing it."""
    swapped: list[tuple[nn.Module, str, LoraLinear]] = []
    options = model.lora_options
    try:
        for parent, name in _targets(model, LORA_TARGETS):
            module = getattr(parent, name)
            if isinstance(module, LoraLinear):
                base = module.base_layer
                plain = nn.Linear(
                    base.in_features, base.out_features, bias=base.bias is not None, device="meta"
                )
                plain.weight = nn.Parameter(module.merged_weight(), requires_grad=False)
                plain.bias = base.bias
                setattr(parent, name, plain)
                swapped.append((parent, name, module))
        model.lora_options = None
        yield model
    finally:
        for parent, name, module in swapped:
            setattr(parent, name, module)
        model.lora_options = options


def _peft_name(module_name: str) -> str:
    """``backbone.layers.0.self_attn.q_proj`` -> peft's ``base_model.model.model.layers.0...``."""
    return _PREFIX + "model." + module_name.removeprefix("backbone.")


def adapter_tensors(model: SequenceClassifier) -> dict[str, torch.Tensor]:
    """The adapter (A, B of every module, and ``score``) under ``peft``'s saved names."""
    out = {}
    for name, module in lora_modules(model).items():
        for part in ("lora_A", "lora_B"):
            w = getattr(module, part).weight
            out[f"{_peft_name(name)}.{part}.weight"] = w.detach().to("cpu", torch.float32).contiguous()
    out[_PREFIX + "score.weight"] = model.score.weight.detach().to("cpu", torch.float32).contiguous()
    return out


def adapter_config(options: LoraOptions, base_model: str | None) -> dict[str, Any]:
    """``adapter_config.json`` with the fields ``peft.LoraConfig`` reads."""
    return {
        "peft_type": "LORA",
        "task_type": "SEQ_CLS",
        "base_model_name_or_path": base_model,
        "revision": None,
        "r": options.rank,
        "lora_alpha": options.alpha,
        "lora_dropout": options.dropout,
        "target_modules": list(options.targets),
        "modules_to_save": ["score"],
        "bias": "none",
        "fan_in_fan_out": False,
        "inference_mode": True,
        "init_lora_weights": True,
        "use_rslora": False,
        "use_dora": False,
        "layers_to_transform": None,
        "layers_pattern": None,
        "rank_pattern": {},
        "alpha_pattern": {},
    }


def save_adapter(
    model: SequenceClassifier, folder: str | os.PathLike[str], *, base_model: str | None = None
) -> Path:
    """Write the adapters of ``model`` in ``peft``'s layout at ``folder``, atomically."""
    options = model.lora_options
    if options is None or not lora_modules(model):
        raise ValueError("the model has no LoRA adapters to save")
    tensors = adapter_tensors(model)
    config = adapter_config(options, base_model)

    def fill(tmp: Path) -> None:
        (tmp / ADAPTER_CONFIG).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        save_file(tensors, str(tmp / ADAPTER_WEIGHTS), metadata={"format": "pt"})

    return atomic_folder(Path(folder), fill)


def load_adapter(model: SequenceClassifier, folder: str | os.PathLike[str]) -> SequenceClassifier:
    """Add the adapters saved at ``folder`` (hexamer's or ``peft``'s) to ``model`` in place."""
    folder = Path(folder)
    try:
        raw = json.loads((folder / ADAPTER_CONFIG).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"no {ADAPTER_CONFIG} in {folder}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{folder / ADAPTER_CONFIG} is not valid JSON: {exc}") from None
    if (
        raw.get("peft_type") != "LORA"
        or raw.get("use_dora")
        or raw.get("rank_pattern")
        or raw.get("alpha_pattern")
    ):
        raise ValueError(
            f"{folder / ADAPTER_CONFIG}: only plain LoRA adapters (no DoRA, no per-module rank) load"
        )
    targets = raw.get("target_modules")
    targets = [targets] if isinstance(targets, str) else targets
    options = LoraOptions(
        int(raw["r"]), float(raw["lora_alpha"]), float(raw.get("lora_dropout", 0.0)), tuple(targets)
    )
    add_lora(model, options)
    return load_adapter_weights(model, folder)


def load_adapter_weights(model: SequenceClassifier, folder: str | os.PathLike[str]) -> SequenceClassifier:
    """Copy the adapter saved at ``folder`` into the adapters ``model`` already has (same targets
    and rank), in place: how a run puts its best adapter back before merging it."""
    folder = Path(folder)
    expected = adapter_tensors(model)
    with safe_open(str(folder / ADAPTER_WEIGHTS), framework="pt", device="cpu") as f:
        stored = {name: f.get_tensor(name) for name in f.keys()}  # noqa: SIM118 (safe_open has no __iter__)
    if set(stored) != set(expected):
        missing, extra = sorted(set(expected) - set(stored))[:3], sorted(set(stored) - set(expected))[:3]
        raise ValueError(
            f"{folder}: adapter does not match the model (missing {missing}, unexpected {extra})"
        )
    params = {
        _peft_name(n) + f".{p}.weight": getattr(m, p).weight
        for n, m in lora_modules(model).items()
        for p in ("lora_A", "lora_B")
    }
    params[_PREFIX + "score.weight"] = model.score.weight
    with torch.no_grad():
        for name, p in params.items():
            if tuple(stored[name].shape) != tuple(p.shape):
                raise ValueError(
                    f"{folder}: tensor {name} has shape {list(stored[name].shape)}, expected {list(p.shape)}"
                )
            p.copy_(stored[name].to(p.dtype))
    return model
