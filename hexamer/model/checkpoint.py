"""A Hugging Face Llama checkpoint folder (``config.json`` + safetensors): its config, its tensor
headers and shards, and its float weights as a :class:`LlamaModel` (int8 loading builds on this in
:mod:`hexamer.model.quant`; :func:`hexamer.model.load_model` picks one).

Only JSON and safetensors are read: no pickle, no ``torch.load``, no code from the folder. The
model is built on the ``meta`` device and every tensor is converted to the target dtype and device
one at a time, so a bf16 load of an fp32 checkpoint never holds a full fp32 copy in memory.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from torch import nn

from hexamer.folder_files import checked_file
from hexamer.model.config import SUPPORTED_DTYPES, ModelConfig
from hexamer.model.device import check_dtype_on_device
from hexamer.model.finite import check_finite_weight
from hexamer.model.llama import LlamaModel
from hexamer.model.memory import check_fits, format_bytes, parameter_count

__all__ = ["load_float_model", "read_folder_config", "resolve_dtype"]

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"

_FLOAT_STORAGE = {"F64", "F32", "F16", "BF16"}
_DTYPES = {name: getattr(torch, name) for name in SUPPORTED_DTYPES}
#: bytes per element of every safetensors dtype (the format's own list)
_ITEMSIZE = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8,
}  # fmt: skip
#: the safetensors library's own ceiling on the JSON header
_MAX_HEADER = 100_000_000
_LAYER = re.compile(r"^model\.layers\.(\d+)\.")


@dataclass(frozen=True)
class StoredTensor:
    """One tensor as a safetensors header describes it (checked against the file's size)."""

    dtype: str
    shape: tuple[int, ...]


def read_safetensors_header(path: Path) -> dict[str, StoredTensor]:
    """The tensors a safetensors file declares, validated against the file itself before any
    tensor is read: a header longer than the file, a truncated data section, offsets that overlap
    or disagree with shape x dtype are errors naming the file (and the tensor)."""
    size = os.stat(path).st_size
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ValueError(f"{path} is not a safetensors file: {size} bytes, too short for a header")
        (n,) = struct.unpack("<Q", head)
        if n > min(size - 8, _MAX_HEADER):
            raise ValueError(
                f"{path} is not a valid safetensors file: its header claims {n} bytes but the file has {size}"
            )
        raw = f.read(n)
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path} is not a valid safetensors file: header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise ValueError(f"{path} is not a valid safetensors file: header is not a JSON object")
    data_size = size - 8 - n
    out: dict[str, StoredTensor] = {}
    spans: list[tuple[int, int, str]] = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        where = f"tensor '{name}' in {path}"
        if not isinstance(info, dict):
            raise ValueError(f"{where}: header entry is not an object")
        dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        if dtype not in _ITEMSIZE:
            raise ValueError(f"{where}: unknown dtype {dtype!r}")
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise ValueError(f"{where}: shape {shape!r} is not a list of non-negative integers")
        if (
            not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
            or not 0 <= offsets[0] <= offsets[1]
        ):
            raise ValueError(f"{where}: data_offsets {offsets!r} are not [begin, end]")
        nbytes = math.prod(shape) * _ITEMSIZE[dtype]
        if offsets[1] - offsets[0] != nbytes:
            raise ValueError(
                f"{where}: shape {shape} as {dtype} is {nbytes} bytes but its data_offsets span "
                f"{offsets[1] - offsets[0]}"
            )
        if offsets[1] > data_size:
            raise ValueError(
                f"{where}: data ends at byte {offsets[1]} of a data section of {data_size} bytes "
                "(the file is truncated)"
            )
        spans.append((offsets[0], offsets[1], name))
        out[name] = StoredTensor(dtype, tuple(shape))
    spans.sort()
    for (_, end, a), (begin, _, b) in itertools.pairwise(spans):
        if begin < end:
            raise ValueError(f"{path}: tensors '{a}' and '{b}' overlap in the data section")
    return out


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
    if index.exists():
        checked_file(index, folder)
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
            shard_path = Path(os.path.normpath(folder / shard))
            if root not in shard_path.resolve().parents and folder not in shard_path.parents:
                raise ValueError(f"{index}: shard '{shard}' of tensor '{name}' lies outside {folder}")
            if not (folder / shard).exists():
                raise FileNotFoundError(f"{index}: shard '{shard}' (holding '{name}') does not exist")
            checked_file(folder / shard, folder)
            names = shards.setdefault(shard_path, set())
            assert names is not None
            names.add(name)
        return shards
    single = folder / SINGLE_FILE
    if single.exists() or single.is_symlink():
        return {checked_file(single, folder): None}
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


def read_folder_config(path: str | Path) -> tuple[Path, ModelConfig]:
    """The checkpoint folder and its parsed ``config.json`` (checked read), or an error naming
    what is missing."""
    folder = Path(path)
    if not folder.is_dir():
        raise FileNotFoundError(f"model folder not found: {folder}")
    config_path = folder / "config.json"
    if not config_path.exists():
        raise FileNotFoundError(f"config.json not found in {folder}")
    return folder, ModelConfig.from_file(config_path)  # read_config_json checks it inside the folder


def load_float_model(
    path: str | Path,
    dtype: torch.dtype | str | None = torch.float32,
    device: torch.device | str = "cpu",
) -> tuple[LlamaModel, ModelConfig]:
    """Load ``path`` (a float checkpoint folder) as an eval-mode :class:`LlamaModel` in ``dtype``
    (:func:`hexamer.model.load_model` picks this or the int8 loader).

    Errors name the folder, file and tensor: missing ``config.json``, missing/unexpected tensors,
    wrong shapes, non-float storage; NaN/inf weights (or finite ones ``dtype`` cannot hold) raise
    :class:`~hexamer.model.finite.NonFiniteWeightsError` as each tensor is read.
    """
    folder, config = read_folder_config(path)
    config_path = folder / "config.json"
    target = resolve_dtype(dtype, config)
    device = torch.device(device)
    check_dtype_on_device(target, device)
    shards = _shards(folder)
    headers = {file: read_safetensors_header(file) for file in shards}
    check_config_matches_headers(folder, config, headers)

    with torch.device("meta"):
        model = LlamaModel(config)
    expected = {_hf_name(name): (name, tuple(p.shape)) for name, p in model.named_parameters()}

    # every name, shape and dtype is checked against the headers before the first tensor is read
    owner: dict[str, Path] = {}
    for file, listed in shards.items():
        present = set(headers[file])
        if listed is not None:
            absent = sorted(listed - present)
            if absent:
                raise ValueError(f"tensor '{absent[0]}' is listed in {INDEX_FILE} but absent from {file}")
        for name in sorted(present):
            if _ignorable(name, config):
                continue
            if name == "score.weight":
                raise ValueError(
                    f"{file} holds 'score.weight': these are the weights of a fine-tuned "
                    "sequence-classification head, not a language model; load the folder with "
                    "hexamer.finetune.load_classifier"
                )
            if name not in expected:
                raise ValueError(f"unexpected tensor '{name}' in {file} (not part of a {_arch(config)})")
            if name in owner:
                raise ValueError(f"tensor '{name}' appears in both {owner[name]} and {file}")
            stored = headers[file][name]
            shape = expected[name][1]
            if stored.shape != shape:
                raise ValueError(
                    f"tensor '{name}' in {file} has shape {list(stored.shape)}, expected {list(shape)} "
                    f"(from {config_path})"
                )
            if stored.dtype not in _FLOAT_STORAGE:
                raise ValueError(
                    f"tensor '{name}' in {file} is stored as {stored.dtype}, expected a float type"
                )
            owner[name] = file
    missing = sorted(set(expected) - set(owner))
    if missing:
        shown = ", ".join(f"'{m}'" for m in missing[:5])
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise ValueError(f"missing tensor(s) in {folder}: {shown}{more}")
    _check_memory(folder, config, target, device)

    for file in shards:
        names = sorted(n for n, f in owner.items() if f == file)
        try:
            with safe_open(str(file), framework="pt", device="cpu") as f:
                for name in names:
                    stored = f.get_tensor(name)
                    tensor = stored.to(dtype=target).to(device=device)
                    check_finite_weight(tensor, name, file, stored)
                    _assign(model, expected[name][0], tensor)
        except SafetensorError as exc:
            raise ValueError(f"{file} could not be read ({exc})") from None
    model.eval()
    return model, config


def check_config_matches_headers(
    folder: Path, config: ModelConfig, headers: dict[Path, dict[str, StoredTensor]]
) -> None:
    """Refuse a ``config.json`` whose layer count or dimensions the stored tensors contradict,
    before the model is built on them (float and int8 folders alike)."""
    _check_layers(folder, config, headers)
    _check_dims(folder / "config.json", config, headers)


def _check_layers(folder: Path, config: ModelConfig, headers: dict[Path, dict[str, StoredTensor]]) -> None:
    """Refuse a layer count the weights do not have before the model is built (a
    ``num_hidden_layers`` of 10^6 would otherwise spend minutes building modules)."""
    layers = {
        int(m.group(1)) for tensors in headers.values() for name in tensors if (m := _LAYER.match(name))
    }
    stored_layers = max(layers) + 1 if layers else 0
    if config.num_hidden_layers > stored_layers:  # more stored layers: named as unexpected below
        raise ValueError(
            f"{folder / 'config.json'}: 'num_hidden_layers' is {config.num_hidden_layers} but the "
            f"safetensors files hold {stored_layers} layer(s)"
        )


def _check_dims(config_path: Path, config: ModelConfig, headers: dict[Path, dict[str, StoredTensor]]) -> None:
    """Compare the config's dimensions with the stored embedding and first layer before the model
    is built (its RoPE table alone is allocated from ``head_dim``), naming the field at fault."""
    stored = {name: t.shape for tensors in headers.values() for name, t in tensors.items()}
    where = {name: file for file, tensors in headers.items() for name in tensors}
    h, q, kv = config.hidden_size, config.num_attention_heads, config.num_key_value_heads
    d = config.head_dim
    checks = [
        ("model.embed_tokens.weight", (config.vocab_size, h), "'vocab_size' x 'hidden_size'"),
        (
            "model.layers.0.self_attn.q_proj.weight",
            (q * d, h),
            "'num_attention_heads' x 'head_dim', 'hidden_size'",
        ),
        (
            "model.layers.0.self_attn.k_proj.weight",
            (kv * d, h),
            "'num_key_value_heads' x 'head_dim', 'hidden_size'",
        ),
        (
            "model.layers.0.mlp.gate_proj.weight",
            (config.intermediate_size, h),
            "'intermediate_size' x 'hidden_size'",
        ),
    ]
    for name, shape, fields in checks:
        if name in stored and stored[name] != shape:
            raise ValueError(
                f"{config_path} does not match the weights: tensor '{name}' in {where[name]} has shape "
                f"{list(stored[name])}, "
                f"but the config's {fields} make it {list(shape)}"
            )


def _check_memory(folder: Path, config: ModelConfig, target: torch.dtype, device: torch.device) -> None:
    """Refuse weights that cannot fit the free memory of ``device``, with the estimate."""
    params = parameter_count(config)
    itemsize = torch.empty((), dtype=target).element_size()
    check_fits(
        params * itemsize,
        device,
        f"{folder}: {params:,} parameters in {str(target).removeprefix('torch.')} "
        f"({format_bytes(params * itemsize)})",
        "free memory or load in a smaller dtype (--dtype bfloat16)",
    )


def _arch(config: ModelConfig) -> str:
    tied = "tied" if config.tie_word_embeddings else "untied"
    return f"{config.num_hidden_layers}-layer Llama with {tied} embeddings"
