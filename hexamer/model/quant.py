"""int8 weight-only quantisation of the decoder's linear layers.

Why: CPU decode streams every weight once per step and already runs at the memory bandwidth, so
the only way to a faster step is fewer bytes per weight. Each decoder projection (q/k/v/o,
gate/up/down) is stored as int8 with one float32 scale per output channel (symmetric, absmax /
127, round to nearest): ``W[n, k] ~ q[n, k] * scale[n]``. Activations stay float32 (``"int8"``) or
bfloat16 (``"int8-bf16"``); the embeddings, the LM head (tied or not) and the norms stay in the
activation dtype, because the head's DNA rows turn hidden states into the scores users read.

:class:`Int8Linear` is the reference (any device: the int8 weight is widened on the fly and the
scale applied to the fp32 sums, the order hexamer's C kernel uses); on the CPU
:func:`hexamer.model.cpu.use_native_linears` moves it to the panel kernel.

A quantized folder (``hexamer quantize``) stores ``<module>.weight`` as I8 [N, K] and
``<module>.weight_scale`` as F32 [N] in safetensors, and ``config.json`` gains
:data:`QUANT_METHOD`'s ``quantization_config`` (see docs/quantization.md). Loaders that do not know
it refuse it: transformers rejects the unknown ``quant_method``; hexamer's training refuses too.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from safetensors import SafetensorError, safe_open
from torch import nn

from hexamer.folder_files import checked_file
from hexamer.model.checkpoint import (
    check_config_matches_headers,
    load_float_model,
    read_folder_config,
    read_safetensors_header,
    resolve_dtype,
)
from hexamer.model.config import ModelConfig, read_config_json
from hexamer.model.finite import check_finite_weight
from hexamer.model.llama import LlamaModel
from hexamer.model.memory import check_fits, format_bytes, parameter_count

__all__ = [
    "INT8_DTYPES",
    "QUANT_METHOD",
    "Int8Linear",
    "folder_quantization",
    "int8_activation_dtype",
    "int8_weight_bytes",
    "load_int8",
    "quantization_config",
    "quantize_model",
    "quantize_weight",
    "refuse_int8_folder",
]

#: ``quantization_config.quant_method`` of a hexamer int8 folder.
QUANT_METHOD = "hexamer_int8"
FORMAT_VERSION = 1
#: The dtype names that select int8 weights, with the activation dtype each implies.
INT8_DTYPES: dict[str, torch.dtype] = {
    "int8": torch.float32,
    "int8-fp32": torch.float32,
    "int8-float32": torch.float32,
    "int8-bf16": torch.bfloat16,
    "int8-bfloat16": torch.bfloat16,
}
#: The projections that are quantized (every other tensor keeps its float dtype).
QUANTIZED_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
SCALE_SUFFIX = "weight_scale"
#: A quantized folder's weights: always one file (an 8B model is ~8 GB in int8).
QUANTIZED_FILE = "model.safetensors"
QMAX = 127


def int8_activation_dtype(dtype: object) -> torch.dtype | None:
    """The activation dtype if ``dtype`` names an int8 load (``"int8"``, ``"int8-bf16"``...), else None."""
    if isinstance(dtype, str):
        return INT8_DTYPES.get(dtype.strip().lower())
    return None


def quantize_weight(weight: torch.Tensor, name: str = "weight") -> tuple[torch.Tensor, torch.Tensor]:
    """``weight`` [N, K] as int8 [N, K] and float32 scales [N]: per output channel, symmetric,
    ``scale = max|w| / 127``, round to nearest (ties to even), so ``|w - q * scale| <= scale / 2``.
    An all-zero row gets scale 1 (its codes are 0). Non-finite weights are refused."""
    if weight.dim() != 2 or not weight.is_floating_point():
        raise ValueError(
            f"{name}: can only quantize a 2-D float weight, got {weight.dtype} {tuple(weight.shape)}"
        )
    w = weight.detach().float()
    if not torch.isfinite(w).all():
        bad = (~torch.isfinite(w)).nonzero()[0].tolist()
        raise ValueError(f"{name}: non-finite weight at {bad}; refusing to quantize")
    amax = w.abs().amax(dim=1)
    scale = torch.where(amax > 0, amax / QMAX, torch.ones_like(amax))
    q = torch.round(w / scale[:, None]).clamp_(-QMAX, QMAX).to(torch.int8)
    return q, scale


class Int8Linear(nn.Module):
    """A bias-optional linear layer with an int8 weight and a float32 scale per output channel.

    ``forward`` computes ``(x @ q.T) * scale (+ bias)`` with float32 sums and rounds once to the
    activation dtype. Inference only. The state dict holds ``weight`` (int8) and ``weight_scale``,
    the names of the on-disk format."""

    weight: torch.Tensor
    weight_scale: torch.Tensor

    def __init__(self, qweight: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        super().__init__()
        if qweight.dtype != torch.int8 or qweight.dim() != 2:
            raise ValueError(
                f"Int8Linear needs an int8 [N, K] weight, got {qweight.dtype} {tuple(qweight.shape)}"
            )
        if scale.shape != (qweight.shape[0],):
            raise ValueError(f"Int8Linear needs {qweight.shape[0]} scales, got shape {tuple(scale.shape)}")
        self.out_features, self.in_features = qweight.shape
        self.register_buffer("weight", qweight)
        self.register_buffer("weight_scale", scale.to(torch.float32))
        self.bias = None if bias is None else nn.Parameter(bias.detach(), requires_grad=False)

    @classmethod
    def from_linear(cls, linear: nn.Module, name: str = "weight") -> Int8Linear:
        """Quantize a float ``nn.Linear`` (or anything with ``weight``/``bias``)."""
        q, scale = quantize_weight(linear.weight, name)
        bias = getattr(linear, "bias", None)
        return cls(q, scale, None if bias is None else bias.detach())

    def dequantized(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The float weight the int8 codes stand for (``q * scale``)."""
        return (self.weight.float() * self.weight_scale.float()[:, None]).to(dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.linear(x.float(), self.weight.float()) * self.weight_scale.float()
        if self.bias is not None:
            y = y + self.bias.float()
        return y.to(x.dtype)

    def _apply(self, fn: Any, recurse: bool = True) -> Int8Linear:
        # Module.to(dtype) would round the scales to the new float dtype: they only follow
        # the device (the int8 codes are never converted, not being floating point)
        scale = self._buffers.pop("weight_scale")
        try:
            super()._apply(fn, recurse)
        finally:
            self._buffers["weight_scale"] = scale.to(device=fn(scale[:0]).device)
        return self

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8 per-channel"


def _decoder_linear_slots(model: LlamaModel) -> list[tuple[str, nn.Module, str]]:
    """(qualified name, parent, attribute) of every quantizable projection."""
    slots = []
    for i, layer in enumerate(model.layers):
        for part_name, part in (("self_attn", layer.self_attn), ("mlp", layer.mlp)):
            for attr in QUANTIZED_MODULES:
                if hasattr(part, attr):
                    slots.append((f"layers.{i}.{part_name}.{attr}", part, attr))
    return slots


def quantize_model(model: LlamaModel, activations: torch.dtype = torch.float32) -> int:
    """Replace every decoder projection of ``model`` by an :class:`Int8Linear` quantized from its
    current weight, and cast everything else to ``activations``; returns how many were quantized."""
    slots = _decoder_linear_slots(model)
    for name, parent, attr in slots:
        child = getattr(parent, attr)
        if not isinstance(child, Int8Linear):
            setattr(parent, attr, Int8Linear.from_linear(child, name))
    model.to(activations)
    return len(slots)


def quantization_config(source_dtype: str | None = None) -> dict[str, Any]:
    """The ``quantization_config`` block ``hexamer quantize`` writes into config.json."""
    return {
        "quant_method": QUANT_METHOD,
        "format_version": FORMAT_VERSION,
        "bits": 8,
        "weight_dtype": "int8",
        "scheme": "symmetric, per output channel, absmax / 127, round to nearest",
        "scale_dtype": "float32",
        "scale_suffix": SCALE_SUFFIX,
        "modules": [f"model.layers.*.{m}" for m in QUANTIZED_MODULES],
        "not_quantized": ["model.embed_tokens", "lm_head", "model.norm", "model.layers.*.*_layernorm"],
        "source_dtype": source_dtype,
    }


def folder_quantization(folder: str | Path) -> dict[str, Any] | None:
    """The folder's ``quantization_config`` (validated) if its config.json has one, else None.
    Unknown methods are refused with the folder named (never loaded as float weights)."""
    config_path = Path(folder) / "config.json"
    try:
        raw = read_config_json(config_path, folder)
    except (OSError, ValueError):
        return None  # the regular loader reports a missing or broken config.json
    qc = raw.get("quantization_config")
    if qc is None:
        return None
    if not isinstance(qc, dict):
        raise ValueError(f"{config_path}: 'quantization_config' must be an object, got {type(qc).__name__}")
    method = qc.get("quant_method")
    if method != QUANT_METHOD:
        raise ValueError(
            f"{config_path}: quantization method {method!r} is not supported (hexamer loads float "
            f"checkpoints and its own {QUANT_METHOD!r} folders written by 'hexamer quantize')"
        )
    if qc.get("format_version") != FORMAT_VERSION or qc.get("bits") != 8:
        raise ValueError(
            f"{config_path}: {QUANT_METHOD} format_version {qc.get('format_version')!r} / bits "
            f"{qc.get('bits')!r} is not supported (this hexamer reads version {FORMAT_VERSION}, 8 bits)"
        )
    return qc


def refuse_int8_folder(folder: str | Path, tool: str) -> None:
    """Raise a clear error where ``tool`` would read an int8 folder as float weights (transformers
    only warns about an unknown ``quantization_config`` and loads the int8 codes as numbers)."""
    if folder_quantization(folder) is not None:
        raise ValueError(
            f"{folder} is a {QUANT_METHOD} folder (int8 weights); {tool} cannot load it: use hexamer "
            "(Carbon.from_pretrained) or the float checkpoint it was quantized from"
        )


def _activation_dtype_for(dtype: object) -> torch.dtype:
    """A quantized folder's activation dtype from the user's ``dtype`` (float names pick it)."""
    chosen = int8_activation_dtype(dtype)
    if chosen is not None:
        return chosen
    if dtype is None or dtype == "auto":
        return torch.float32
    return resolve_dtype(dtype, _NO_CONFIG)  # type: ignore[arg-type]


class _NoConfig:
    dtype = None


_NO_CONFIG = _NoConfig()


def load_int8(
    folder: Path, config: ModelConfig, qconfig: dict[str, Any] | None, dtype: object, device: torch.device
) -> tuple[LlamaModel, ModelConfig]:
    """``load_model``'s int8 branch: a quantized folder (``qconfig``) read as stored, or a float
    folder quantized while loading (from float32, whatever the activation dtype)."""
    activations = _activation_dtype_for(dtype)
    if qconfig is None:
        model, config = load_float_model(folder, dtype=torch.float32, device="cpu")
        quantize_model(model, activations)
        return model.to(device).eval(), config
    return _load_quantized_folder(folder, config, activations, device), config


def int8_weight_bytes(config: ModelConfig, activations: torch.dtype) -> int:
    """Bytes an int8 model of ``config`` holds: one per projection weight, four per output
    channel's scale, everything else (embeddings, head, norms, biases) in ``activations``."""
    h, f = config.hidden_size, config.intermediate_size
    q = config.num_attention_heads * config.head_dim
    kv = config.num_key_value_heads * config.head_dim
    codes = config.num_hidden_layers * (2 * h * q + 2 * h * kv + 3 * h * f)
    scales = config.num_hidden_layers * (q + 2 * kv + h + 2 * f + h)
    itemsize = torch.empty((), dtype=activations).element_size()
    return codes + 4 * scales + (parameter_count(config) - codes) * itemsize


def _load_quantized_folder(
    folder: Path, config: ModelConfig, activations: torch.dtype, device: torch.device
) -> LlamaModel:
    """Read a quantized folder the way ``load_model`` reads a float one: the file's header is
    checked against its size, every name, shape and dtype against ``config.json``, and the
    weights' size against the free memory, all before the first tensor is read."""

    file = folder / QUANTIZED_FILE
    if not os.path.lexists(file):
        raise FileNotFoundError(f"{folder} is a {QUANT_METHOD} folder but has no {QUANTIZED_FILE}")
    header = read_safetensors_header(checked_file(file, folder))
    check_config_matches_headers(folder, config, {file: header})
    with torch.device("meta"):
        model = LlamaModel(config)
        for _, parent, attr in _decoder_linear_slots(model):
            lin = getattr(parent, attr)
            q = torch.empty(lin.out_features, lin.in_features, dtype=torch.int8)
            bias = None if lin.bias is None else torch.empty(lin.out_features)
            setattr(parent, attr, Int8Linear(q, torch.empty(lin.out_features), bias))
    quantized = {f"model.{name}" for name, _, _ in _decoder_linear_slots(model)}
    expected: dict[str, tuple[str, tuple[int, ...], str]] = {}
    for name, p in model.named_parameters():
        expected["lm_head.weight" if name.startswith("lm_head.") else f"model.{name}"] = (
            name,
            tuple(p.shape),
            "float",
        )
    for name, b in model.named_buffers():
        hf = f"model.{name}"
        module = hf.rpartition(".")[0]
        if module in quantized:
            kind = "int8" if name.endswith(".weight") else "scale"
            expected[hf] = (name, tuple(b.shape), kind)
    storage = {"float": {"F64", "F32", "F16", "BF16"}, "int8": {"I8"}, "scale": {"F32"}}
    names: list[str] = []
    for name in sorted(header):
        if name.endswith("rotary_emb.inv_freq") or (config.tie_word_embeddings and name == "lm_head.weight"):
            continue
        if name not in expected:
            raise ValueError(f"unexpected tensor '{name}' in {file} (not part of this int8 checkpoint)")
        _, shape, kind = expected[name]
        stored = header[name]
        if stored.shape != shape:
            raise ValueError(
                f"tensor '{name}' in {file} has shape {list(stored.shape)}, expected {list(shape)} "
                f"(from {folder / 'config.json'})"
            )
        if stored.dtype not in storage[kind]:
            raise ValueError(
                f"tensor '{name}' in {file} is stored as {stored.dtype}, expected "
                f"{' or '.join(sorted(storage[kind]))} in a {QUANT_METHOD} folder"
            )
        names.append(name)
    missing = sorted(set(expected) - set(names))
    if missing:
        shown = ", ".join(f"'{m}'" for m in missing[:5])
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise ValueError(f"missing tensor(s) in {folder}: {shown}{more}")
    need = int8_weight_bytes(config, activations)
    check_fits(
        need,
        device,
        f"{folder}: {parameter_count(config):,} parameters in int8 with "
        f"{str(activations).removeprefix('torch.')} activations ({format_bytes(need)})",
        "free memory or use a smaller model",
    )
    try:
        with safe_open(str(file), framework="pt", device="cpu") as f:
            for name in names:
                attr_path, _, kind = expected[name]
                tensor = f.get_tensor(name)
                if kind != "float":
                    check_finite_weight(tensor, name, file)
                if kind == "scale" and not (tensor > 0).all():
                    raise ValueError(
                        f"tensor '{name}' in {file} holds scales that are not > 0 (a scale must be finite and > 0)"
                    )
                module_path, _, attr = attr_path.rpartition(".")
                module = model.get_submodule(module_path)
                if kind == "float":
                    converted = tensor.to(activations)
                    check_finite_weight(converted, name, file, tensor)
                    setattr(module, attr, nn.Parameter(converted, requires_grad=False))
                else:
                    module._buffers[attr] = tensor.contiguous()
    except SafetensorError as exc:
        raise ValueError(f"{file} could not be read ({exc})") from None
    return model.to(device).eval()


def quantized_tensors(model: LlamaModel, float_dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """The safetensors contents of a quantized folder for ``model`` (its projections already
    :class:`Int8Linear`): Hugging Face names, int8 codes + float32 scales, the rest in ``float_dtype``."""
    tensors: dict[str, torch.Tensor] = {}
    for name, p in model.named_parameters():  # a tied head appears once, as the embedding
        hf = name if name.startswith("lm_head.") else f"model.{name}"
        tensors[hf] = p.detach().to(float_dtype).contiguous()
    for name, parent, attr in _decoder_linear_slots(model):
        lin = getattr(parent, attr)
        if not isinstance(lin, Int8Linear):
            lin = Int8Linear(lin.weight, lin.weight_scale, lin.bias) if hasattr(lin, "weight_scale") else None
        if lin is None:
            raise ValueError(f"{name} is not quantized")
        tensors[f"model.{name}.weight"] = lin.weight.contiguous()
        tensors[f"model.{name}.{SCALE_SUFFIX}"] = lin.weight_scale.float().contiguous()
    return tensors


def quantize_folder(source: str | Path, out: str | Path) -> Path:
    """Write an int8 copy of the float checkpoint folder ``source`` to ``out`` (which must not
    exist or be empty): :func:`quantized_tensors` in one ``model.safetensors``, config.json with
    :func:`quantization_config`, the tokenizer and other small files copied. The folder is built
    beside ``out`` and renamed into place after it loads back, so ``out`` is never half-written."""
    import shutil
    import tempfile

    from safetensors.torch import save_file

    source, out = Path(source), Path(out)
    if folder_quantization(source) is not None:
        raise ValueError(f"{source} is already quantized ({QUANT_METHOD}); quantize the float checkpoint")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{out} already exists and is not an empty folder; choose a new output folder")
    if out.resolve() == source.resolve():
        raise ValueError("the output folder must differ from the source folder")
    model, config = load_float_model(source, dtype=torch.float32)  # validates every tensor first
    raw = read_config_json(source / "config.json")
    float_dtype = (
        getattr(torch, config.dtype) if config.dtype in ("float32", "bfloat16", "float16") else torch.float32
    )
    quantize_model(model, torch.float32)
    tensors = quantized_tensors(model, float_dtype)
    del model
    raw["quantization_config"] = quantization_config(config.dtype)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        skip = {"config.json", "model.safetensors.index.json"}
        weights = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
        for item in source.iterdir():
            if (
                item.is_file()
                and not item.is_symlink()
                and item.name not in skip
                and item.suffix not in weights
            ):
                shutil.copy2(item, staging / item.name)
        (staging / "config.json").write_text(json.dumps(raw, indent=2) + "\n", encoding="utf-8")
        save_file(
            tensors, str(staging / QUANTIZED_FILE), metadata={"format": "pt", "quant_method": QUANT_METHOD}
        )
        _, staged = read_folder_config(staging)
        check, _ = load_int8(  # what we wrote must load, code for code (as load_model reads it)
            staging, staged, folder_quantization(staging), torch.float32, torch.device("cpu")
        )
        for name, parent, attr in _decoder_linear_slots(check):
            if not torch.equal(getattr(parent, attr).weight, tensors[f"model.{name}.weight"]):
                raise RuntimeError(f"{name}: the written int8 weight does not load back")
        del check
        if out.exists():
            out.rmdir()
        staging.rename(out)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return out
