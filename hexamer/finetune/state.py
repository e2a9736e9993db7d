"""Resumable fine-tuning checkpoints: trainable weights, optimizer state, RNG and loop state.

One folder, ``<output_dir>/checkpoint``, replaced atomically at each save: ``state.safetensors``
(trainable parameters by name, AdamW moments as ``<name>::<field>``, the torch CPU and CUDA RNG) and
``fit_state.json`` (step, history, best score, early-stopping and plateau counters, the options
and a fingerprint of the data). Frozen weights are not stored: a resumed run rebuilds them from
the base folder and the seed, exactly as the first run did. A checkpoint of another run (other
options, other rows) is refused rather than continued.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file
from torch import nn

from hexamer.finetune.task import LabelledSet
from hexamer.train.checkpoint import atomic_folder

__all__ = ["CHECKPOINT_DIR", "STATE_JSON", "data_fingerprint", "load_fit_state", "save_fit_state"]

CHECKPOINT_DIR = "checkpoint"
STATE_JSON = "fit_state.json"
_TENSORS = "state.safetensors"


def data_fingerprint(*sets: LabelledSet | None) -> str:
    """SHA-256 over the ids, sequences, labels and weights of ``sets`` (None counts too)."""
    h = hashlib.sha256()
    for s in sets:
        if s is None:
            h.update(b"<none>")
            continue
        for text in (*s.ids, "\x00", *s.sequences, "\x00"):
            h.update(text.encode("utf-8") + b"\x01")
        h.update(np.ascontiguousarray(s.labels).tobytes())
        h.update(b"<w>" if s.weights is None else np.ascontiguousarray(s.weights).tobytes())
    return h.hexdigest()


def _trainable(model: nn.Module) -> dict[str, nn.Parameter]:
    return {name: p for name, p in model.named_parameters() if p.requires_grad}


def save_fit_state(
    output_dir: str | os.PathLike[str],
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    state: dict[str, Any],
) -> Path:
    """Write ``<output_dir>/checkpoint`` (replacing the previous one) and return it."""
    params = _trainable(model)
    names = {id(p): n for n, p in params.items()}
    tensors = {n: p.detach().to("cpu").contiguous() for n, p in params.items()}
    for group in optimizer.param_groups:
        for p in group["params"]:
            for key, value in optimizer.state.get(p, {}).items():
                value = value if isinstance(value, torch.Tensor) else torch.tensor(value)
                tensors[f"{names[id(p)]}::{key}"] = value.detach().to("cpu").contiguous()
    tensors["rng::torch_cpu"] = torch.get_rng_state()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        tensors["rng::torch_cuda"] = torch.cuda.get_rng_state()
    payload = {**state, "trainable": sorted(params)}

    def fill(tmp: Path) -> None:
        save_file(tensors, str(tmp / _TENSORS), metadata={"format": "pt"})
        (tmp / STATE_JSON).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")

    return atomic_folder(Path(output_dir) / CHECKPOINT_DIR, fill)


def read_fit_state(output_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The loop state of ``<output_dir>/checkpoint``, or None when there is no checkpoint."""
    path = Path(output_dir) / CHECKPOINT_DIR / STATE_JSON
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("step"), int):
        raise ValueError(f"{path} is not a fine-tuning checkpoint (no step)")
    return data


def load_fit_state(
    output_dir: str | os.PathLike[str], model: nn.Module, optimizer: torch.optim.Optimizer
) -> None:
    """Put the checkpoint's trainable weights, optimizer moments and RNG back (in place); every
    trainable parameter of ``model`` must be in it with its shape, or nothing is changed."""
    folder = Path(output_dir) / CHECKPOINT_DIR
    params = _trainable(model)
    try:
        with safe_open(str(folder / _TENSORS), framework="pt", device="cpu") as f:
            stored = {name: f.get_tensor(name) for name in f.keys()}  # noqa: SIM118 (safe_open has no __iter__)
    except (FileNotFoundError, SafetensorError) as exc:
        raise ValueError(f"{folder / _TENSORS} could not be read ({exc})") from None
    for name, p in params.items():
        if name not in stored or tuple(stored[name].shape) != tuple(p.shape):
            raise ValueError(f"{folder}: checkpoint does not hold trainable tensor '{name}' {list(p.shape)}")
    with torch.no_grad():
        for name, p in params.items():
            p.copy_(stored[name].to(p.dtype))
    names = {id(p): n for n, p in params.items()}
    for group in optimizer.param_groups:
        for p in group["params"]:
            fields = {k.partition("::")[2]: v for k, v in stored.items() if k.startswith(names[id(p)] + "::")}
            if fields:
                optimizer.state[p] = {k: v.to(p.device) if v.dim() else v for k, v in fields.items()}
    torch.set_rng_state(stored["rng::torch_cpu"])
    if "rng::torch_cuda" in stored and torch.cuda.is_available():
        torch.cuda.set_rng_state(stored["rng::torch_cuda"])
