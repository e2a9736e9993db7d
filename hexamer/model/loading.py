"""Load a Hugging Face Llama checkpoint folder (``config.json`` + safetensors) into :class:`LlamaModel`.

Only JSON and safetensors are read: no pickle, no ``torch.load``, no code from the folder. The
model is built on the ``meta`` device and every tensor is converted to the target dtype and device
one at a time, so a bf16 load of an fp32 checkpoint never holds a full fp32 copy in memory.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open
from torch import nn

from hexamer.model.config import SUPPORTED_DTYPES, ModelConfig
from hexamer.model.llama import LlamaModel

__all__ = ["load_model", "resolve_dtype"]

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"

_FLOAT_STORAGE = {"F64", "F32", "F16", "BF16"}
_DTYPES = {name: getattr(torch, name) for name in SUPPORTED_DTYPES}


def resolve_dtype(dtype: torch.dtype | str | None, config: ModelConfig) -> torch.dtype:
    """Turn a user dtype (``torch.bfloat16``, ``"bf16"``, ``"auto"``...) into a supported torch dtype.

    ``"auto"``/``None`` picks the checkpoint's declared dtype, falling back to float32.
    """
    if dtype is None or dtype == "auto":
        return _DTYPES[config.dtype] if config.dtype else torch.float32
    if isinstance(dtype, str):
        aliases = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "half": "float16"}
        name = aliases.get(dtype, dtype.removeprefix("torch."))
        if name not in _DTYPES:
            raise ValueError(f"unsupported dtype {dtype!r}; use one of {[*SUPPORTED_DTYPES, 'auto']}")
        return _DTYPES[name]
    if dtype not in _DTYPES.values():
        raise ValueError(f"unsupported dtype {dtype}; use torch.float32, torch.bfloat16 or torch.float16")
    return dtype


def _shards(folder: Path) -> dict[Path, set[str] | None]:
    """Safetensors files to read, each with the tensor names the index assigns to it.

    ``None`` means "every tensor in the file" (single ``model.safetensors``). Shards named by the
    index must exist and stay inside the folder.
    """
    index = folder / INDEX_FILE
    if index.is_file():
        try:
            data = json.loads(index.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{index} is not valid JSON: {exc}") from None
        weight_map = data.get("weight_map") if isinstance(data, dict) else None
        if not isinstance(weight_map, dict) or not weight_map:
            raise ValueError(f"{index} has no 'weight_map' object")
        root = folder.resolve()
        shards: dict[Path, set[str] | None] = {}
        for name, shard in weight_map.items():
            if not isinstance(shard, str):
                raise ValueError(f"{index}: shard of tensor '{name}' must be a file name, got {shard!r}")
            shard_path = (folder / shard).resolve()
            if root not in shard_path.parents:
                raise ValueError(f"{index}: shard '{shard}' of tensor '{name}' lies outside {folder}")
            if not shard_path.is_file():
                raise FileNotFoundError(f"{index}: shard '{shard}' (holding '{name}') does not exist")
            names = shards.setdefault(shard_path, set())
            assert names is not None
            names.add(name)
        return shards
    single = folder / SINGLE_FILE
    if single.is_file():
        return {single: None}
    if any(folder.glob("*.bin")) or any(folder.glob("*.pt")) or any(folder.glob("*.pth")):
        raise FileNotFoundError(
            f"no {SINGLE_FILE} or {INDEX_FILE} in {folder}; pickle checkpoints (.bin/.pt) are never loaded, "
            "convert them to safetensors first"
        )
    raise FileNotFoundError(f"no {SINGLE_FILE} or {INDEX_FILE} in {folder}")


def _hf_name(param_name: str) -> str:
    return param_name if param_name.startswith("lm_head.") else f"model.{param_name}"


def _ignorable(name: str, config: ModelConfig) -> bool:
    # Old exports store the (recomputed) rotary table; tied checkpoints sometimes store the head too.
    return name.endswith("rotary_emb.inv_freq") or (config.tie_word_embeddings and name == "lm_head.weight")


def _assign(model: nn.Module, param_name: str, tensor: torch.Tensor) -> None:
    module_path, _, attr = param_name.rpartition(".")
    module = model.get_submodule(module_path) if module_path else model
    setattr(module, attr, nn.Parameter(tensor, requires_grad=False))


def load_model(
    path: str | Path,
    dtype: torch.dtype | str | None = torch.float32,
    device: torch.device | str = "cpu",
) -> tuple[LlamaModel, ModelConfig]:
    """Load ``path`` (a local checkpoint folder) as an eval-mode :class:`LlamaModel` in ``dtype``.

    Errors name the folder, file and tensor: missing ``config.json``, missing/unexpected tensors,
    wrong shapes, non-float storage.
    """
    folder = Path(path)
    if not folder.is_dir():
        raise FileNotFoundError(f"model folder not found: {folder}")
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise FileNotFoundError(f"config.json not found in {folder}")
    config = ModelConfig.from_file(config_path)
    # int8 weight-only quantisation lives in hexamer.model.quant: a quantized folder, or an
    # "int8"/"int8-bf16" dtype, takes its loader
    from hexamer.model import quant

    qconfig = quant.folder_quantization(folder)
    if qconfig is not None or quant.int8_activation_dtype(dtype) is not None:
        return quant.load_int8(folder, config, qconfig, dtype, torch.device(device))
    target = resolve_dtype(dtype, config)
    device = torch.device(device)
    shards = _shards(folder)

    with torch.device("meta"):
        model = LlamaModel(config)
    expected = {_hf_name(name): (name, tuple(p.shape)) for name, p in model.named_parameters()}

    loaded: dict[str, Path] = {}
    for file, listed in shards.items():
        with safe_open(str(file), framework="pt", device="cpu") as f:
            present = set(f.keys())
            if listed is not None:
                absent = sorted(listed - present)
                if absent:
                    raise ValueError(f"tensor '{absent[0]}' is listed in {INDEX_FILE} but absent from {file}")
            for name in sorted(present):
                if _ignorable(name, config):
                    continue
                if name not in expected:
                    raise ValueError(f"unexpected tensor '{name}' in {file} (not part of a {_arch(config)})")
                if name in loaded:
                    raise ValueError(f"tensor '{name}' appears in both {loaded[name]} and {file}")
                param_name, shape = expected[name]
                view = f.get_slice(name)
                stored_shape = tuple(view.get_shape())
                if stored_shape != shape:
                    raise ValueError(
                        f"tensor '{name}' in {file} has shape {list(stored_shape)}, expected {list(shape)}"
                    )
                if view.get_dtype() not in _FLOAT_STORAGE:
                    raise ValueError(
                        f"tensor '{name}' in {file} is stored as {view.get_dtype()}, expected a float type"
                    )
                tensor = f.get_tensor(name).to(dtype=target).to(device=device)
                _assign(model, param_name, tensor)
                loaded[name] = file

    missing = sorted(set(expected) - set(loaded))
    if missing:
        shown = ", ".join(f"'{m}'" for m in missing[:5])
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise ValueError(f"missing tensor(s) in {folder}: {shown}{more}")
    model.eval()
    return model, config


def _arch(config: ModelConfig) -> str:
    tied = "tied" if config.tie_word_embeddings else "untied"
    return f"{config.num_hidden_layers}-layer Llama with {tied} embeddings"
