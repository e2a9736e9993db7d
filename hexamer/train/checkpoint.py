"""Checkpoints: Carbon-format model folders plus optimizer state, written atomically, never pickled.

A checkpoint folder is a complete model folder (``config.json``, ``generation_config.json``,
tokenizer files, ``model.safetensors`` under Hugging Face Llama names, tied head not stored), so
``hexamer.model.load_model``, ``Carbon.from_pretrained`` and ``transformers.LlamaForCausalLM``
all read it. A training checkpoint adds ``optimizer.safetensors`` (AdamW moments and step
counters, keyed by parameter name) and ``trainer_state.json`` (step, config, history, optimizer
hyper-parameters). Everything is written into a hidden sibling folder and renamed into place, so
a killed job leaves either the old checkpoint or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from hexamer.model import LlamaModel
from hexamer.tokenizer import CarbonTokenizer

__all__ = [
    "CHECKPOINT_PREFIX",
    "OPTIMIZER_FILE",
    "STATE_FILE",
    "atomic_folder",
    "checkpoint_path",
    "list_checkpoints",
    "load_training_state",
    "model_tensors",
    "prune_checkpoints",
    "write_model_folder",
]

CHECKPOINT_PREFIX = "checkpoint-"
OPTIMIZER_FILE = "optimizer.safetensors"
STATE_FILE = "trainer_state.json"
_CKPT_RE = re.compile(rf"^{CHECKPOINT_PREFIX}(\d+)$")
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _hf_name(name: str) -> str:
    return name if name.startswith("lm_head.") else f"model.{name}"


def model_tensors(model: LlamaModel, dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
    """Weights under Hugging Face ``LlamaForCausalLM`` names (a tied head is not stored)."""
    return {
        _hf_name(name): p.detach().to(device="cpu", dtype=dtype).contiguous()
        for name, p in model.named_parameters()
    }


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def _fsync_tree(folder: Path) -> None:
    """Flush every file, and give them the usual umask permissions (some writers create 0600)."""
    umask = os.umask(0)
    os.umask(umask)
    for f in folder.iterdir():
        if f.is_file():
            f.chmod(0o666 & ~umask)
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())


def atomic_folder(target: Path, fill: Any) -> Path:
    """Call ``fill(tmp)`` on a fresh hidden folder next to ``target``, then swap it into place."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        fill(tmp)
        _fsync_tree(tmp)
        old = None
        if target.exists():
            old = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:8]}"
            os.rename(target, old)
        os.rename(tmp, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def _fill_model(
    out: Path, model: LlamaModel, hf_config: dict[str, Any], tokenizer: CarbonTokenizer, dtype: str
) -> None:
    config = dict(hf_config)
    config["torch_dtype"] = dtype
    config.pop("dtype", None)  # transformers v5 spelling: keep one declaration
    _write_json(out / "config.json", config)
    gen: dict[str, Any] = {"do_sample": False}
    if tokenizer.eos_token_id is not None:
        gen["eos_token_id"] = tokenizer.eos_token_id
    if tokenizer.pad_token_id is not None:
        gen["pad_token_id"] = tokenizer.pad_token_id
    _write_json(out / "generation_config.json", gen)
    tokenizer.copy_files_to(out)
    save_file(model_tensors(model, _DTYPES[dtype]), str(out / "model.safetensors"), metadata={"format": "pt"})


def write_model_folder(
    target: str | os.PathLike[str],
    model: LlamaModel,
    hf_config: dict[str, Any],
    tokenizer: CarbonTokenizer,
    *,
    dtype: str = "float32",
    extra_files: dict[str, str] | None = None,
) -> Path:
    """Write a loadable Carbon-format model folder at ``target`` atomically (replacing it)."""
    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(_DTYPES)}, got {dtype!r}")

    def fill(tmp: Path) -> None:
        _fill_model(tmp, model, hf_config, tokenizer, dtype)
        for name, text in (extra_files or {}).items():
            (tmp / name).write_text(text, encoding="utf-8")

    return atomic_folder(Path(target), fill)


# ---------------------------------------------------------------------------------------------
# training checkpoints


def checkpoint_path(run_dir: str | os.PathLike[str], step: int) -> Path:
    return Path(run_dir) / f"{CHECKPOINT_PREFIX}{step:07d}"


def list_checkpoints(run_dir: str | os.PathLike[str]) -> list[Path]:
    """Complete checkpoints of a run, oldest first (hidden temporary folders are ignored)."""
    root = Path(run_dir)
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := _CKPT_RE.match(p.name)) and p.is_dir()]
    return [p for _, p in sorted(found) if (p / STATE_FILE).is_file()]


def prune_checkpoints(run_dir: str | os.PathLike[str], keep: int) -> None:
    for old in list_checkpoints(run_dir)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)


def _param_names(model: LlamaModel) -> dict[int, str]:
    return {id(p): name for name, p in model.named_parameters()}


def _optimizer_payload(
    optimizer: torch.optim.Optimizer, model: LlamaModel
) -> tuple[dict[str, torch.Tensor], list[dict[str, Any]]]:
    """Optimizer state as named tensors plus JSON-able param groups (hyper-parameters + names)."""
    names = _param_names(model)
    tensors: dict[str, torch.Tensor] = {}
    groups: list[dict[str, Any]] = []
    for group in optimizer.param_groups:
        entry = {k: (list(v) if isinstance(v, tuple) else v) for k, v in group.items() if k != "params"}
        entry["params"] = [names[id(p)] for p in group["params"]]
        groups.append(entry)
        for p in group["params"]:
            for key, value in optimizer.state.get(p, {}).items():
                if not isinstance(value, torch.Tensor):
                    value = torch.tensor(value)
                tensors[f"{names[id(p)]}::{key}"] = value.detach().to("cpu").contiguous()
    return tensors, groups


def write_checkpoint(
    run_dir: str | os.PathLike[str],
    step: int,
    model: LlamaModel,
    optimizer: torch.optim.Optimizer,
    hf_config: dict[str, Any],
    tokenizer: CarbonTokenizer,
    state: dict[str, Any],
) -> Path:
    """Atomically write ``checkpoint-<step>``: fp32 model folder + optimizer + trainer state."""
    opt_tensors, groups = _optimizer_payload(optimizer, model)
    rng = {"rng::torch_cpu": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        rng["rng::torch_cuda"] = torch.cuda.get_rng_state()

    def fill(tmp: Path) -> None:
        _fill_model(tmp, model, hf_config, tokenizer, "float32")
        save_file({**opt_tensors, **rng}, str(tmp / OPTIMIZER_FILE), metadata={"format": "pt"})
        _write_json(tmp / STATE_FILE, {**state, "step": step, "param_groups": groups})

    return atomic_folder(checkpoint_path(run_dir, step), fill)


def load_training_state(
    folder: str | os.PathLike[str], model: LlamaModel, optimizer: torch.optim.Optimizer
) -> dict[str, Any]:
    """Load weights and optimizer state from a checkpoint into ``model``/``optimizer`` (in place)
    and return the trainer state JSON. Names must match exactly: resuming another model fails."""
    folder = Path(folder)
    state_path = folder / STATE_FILE
    if not state_path.is_file():
        raise FileNotFoundError(f"{folder} is not a training checkpoint (no {STATE_FILE})")
    state = json.loads(state_path.read_text(encoding="utf-8"))
    params = dict(model.named_parameters())
    with safe_open(str(folder / "model.safetensors"), framework="pt", device="cpu") as f:
        stored = {name: f.get_tensor(name) for name in f.keys()}  # noqa: SIM118 (safe_open has no __iter__)
    expected = {_hf_name(n) for n in params}
    if set(stored) != expected:
        missing = sorted(expected - set(stored))[:3]
        extra = sorted(set(stored) - expected)[:3]
        raise ValueError(
            f"{folder}: checkpoint weights do not match the model (missing {missing}, unexpected {extra})"
        )
    with torch.no_grad():
        for name, p in params.items():
            t = stored[_hf_name(name)]
            if tuple(t.shape) != tuple(p.shape):
                raise ValueError(
                    f"{folder}: tensor {name} has shape {list(t.shape)}, model has {list(p.shape)}"
                )
            p.copy_(t.to(p.dtype))

    with safe_open(str(folder / OPTIMIZER_FILE), framework="pt", device="cpu") as f:
        opt = {name: f.get_tensor(name) for name in f.keys()}  # noqa: SIM118
    groups = state.get("param_groups")
    if not isinstance(groups, list) or len(groups) != len(optimizer.param_groups):
        raise ValueError(f"{folder}: optimizer groups do not match this run")
    param_names = _param_names(model)
    index: dict[str, int] = {}
    sd_groups: list[dict[str, Any]] = []
    for saved, group in zip(groups, optimizer.param_groups, strict=True):
        names = list(saved["params"])
        if names != [param_names[id(p)] for p in group["params"]]:
            raise ValueError(f"{folder}: optimizer parameters do not match this model")
        ids = []
        for n in names:
            index[n] = len(index)
            ids.append(index[n])
        hyper = {k: (tuple(v) if k == "betas" else v) for k, v in saved.items() if k != "params"}
        current = {k: v for k, v in group.items() if k != "params"}
        sd_groups.append({**current, **hyper, "params": ids})
    per_param: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in opt.items():
        if key.startswith("rng::"):
            continue
        name, _, field = key.partition("::")
        if name not in index:
            raise ValueError(f"{folder}: optimizer state for unknown parameter {name}")
        per_param.setdefault(index[name], {})[field] = value
    optimizer.load_state_dict({"state": per_param, "param_groups": sd_groups})
    if "rng::torch_cpu" in opt:
        torch.set_rng_state(opt["rng::torch_cpu"])
    if "rng::torch_cuda" in opt and torch.cuda.is_available():
        with contextlib.suppress(RuntimeError):
            torch.cuda.set_rng_state(opt["rng::torch_cuda"])
    return state
