"""int8 and int4 quantisation of the decoder's linear layers: formats, folders and loading.

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

int4 weights (``bits: 4``: :class:`~hexamer.model.lowbit.Int4Linear`, grouped float16 scales) and
int8 activations (``"int8-a8"``) are defined in :mod:`hexamer.model.lowbit`; the folder format,
loading and refusals here serve both widths.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
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
from hexamer.model.lowbit import (
    GROUP,
    Int4Linear,
    apply_keeping_scales,
    fake_quantize_activations,
    padded_in_features,
)
from hexamer.model.memory import check_fits, format_bytes, parameter_count

__all__ = [
    "INT8_DTYPES",
    "LOWBIT_DTYPES",
    "QUANT_METHOD",
    "Int8Linear",
    "folder_quantization",
    "int8_activation_dtype",
    "int8_weight_bytes",
    "load_int8",
    "lowbit_mode",
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
#: Every quantized dtype name: (weight bits, activation dtype, int8 activations in the projections).
LOWBIT_DTYPES: dict[str, tuple[int, torch.dtype, bool]] = {
    **{name: (8, act, False) for name, act in INT8_DTYPES.items()},
    "int8-a8": (8, torch.float32, True),
    "int4": (4, torch.float32, True),
    "int4-bf16": (4, torch.bfloat16, True),
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


def lowbit_mode(dtype: object) -> tuple[int, torch.dtype, bool] | None:
    """(weight bits, activation dtype, int8 activations) if ``dtype`` names a quantized load
    (``"int8"``, ``"int8-bf16"``, ``"int8-a8"``, ``"int4"``), else None."""
    if isinstance(dtype, str):
        return LOWBIT_DTYPES.get(dtype.strip().lower())
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
    activation dtype; with ``quantize_activations`` ``x`` is first rounded per row to int8
    (:func:`~hexamer.model.lowbit.fake_quantize_activations`, what the VNNI kernel does). Inference only. The state dict holds ``weight`` (int8) and ``weight_scale``,
    the names of the on-disk format."""

    weight: torch.Tensor
    weight_scale: torch.Tensor
    quantize_activations = False

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
        inputs = fake_quantize_activations(x) if self.quantize_activations else x.float()
        y = F.linear(inputs, self.weight.float()) * self.weight_scale.float()
        if self.bias is not None:
            y = y + self.bias.float()
        return y.to(x.dtype)

    def _apply(self, fn: Any, recurse: bool = True) -> Int8Linear:
        # the scales only follow the device (the int8 codes are never converted, not being
        # floating point)
        apply_keeping_scales(self, super()._apply, fn, recurse)
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


def quantize_model(
    model: LlamaModel,
    activations: torch.dtype = torch.float32,
    *,
    bits: int = 8,
    int8_activations: bool = False,
) -> int:
    """Replace every decoder projection of ``model`` by an :class:`Int8Linear` (``bits=8``) or an
    :class:`~hexamer.model.lowbit.Int4Linear` (``bits=4``) quantized from its current weight, and
    cast everything else to ``activations``; returns how many were quantized."""
    slots = _decoder_linear_slots(model)
    for name, parent, attr in slots:
        child = getattr(parent, attr)
        if not isinstance(child, (Int8Linear, Int4Linear)):
            child = (Int4Linear if bits == 4 else Int8Linear).from_linear(child, name)
            setattr(parent, attr, child)
        if isinstance(child, Int8Linear):
            child.quantize_activations = int8_activations
    model.to(activations)
    return len(slots)


def quantization_config(source_dtype: str | None = None, bits: int = 8) -> dict[str, Any]:
    """The ``quantization_config`` block ``hexamer quantize`` writes into config.json."""
    if bits == 4:
        return {
            "quant_method": QUANT_METHOD,
            "format_version": FORMAT_VERSION,
            "bits": 4,
            "weight_dtype": "int4",
            "group_size": GROUP,
            "scheme": f"symmetric, per output channel and {GROUP} inputs, scale = (weight of largest "
            "magnitude) / -8, codes in [-8, 7], round to nearest",
            "packing": f"uint8 [out, in/2]: code + 8, even input in the low nibble, rows padded to a "
            f"multiple of {GROUP} inputs",
            "scale_dtype": "float16",
            "scale_suffix": SCALE_SUFFIX,
            "activations": "int8 per row (token), absmax / 127, round to nearest even, on the fly",
            "modules": [f"model.layers.*.{m}" for m in QUANTIZED_MODULES],
            "not_quantized": ["model.embed_tokens", "lm_head", "model.norm", "model.layers.*.*_layernorm"],
            "source_dtype": source_dtype,
        }
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
    bits = qc.get("bits")
    if (
        qc.get("format_version") != FORMAT_VERSION
        or bits not in (8, 4)
        or (bits == 4 and qc.get("group_size") != GROUP)
    ):
        raise ValueError(
            f"{config_path}: {QUANT_METHOD} format_version {qc.get('format_version')!r} / bits "
            f"{bits!r} / group_size {qc.get('group_size')!r} is not supported (this hexamer reads "
            f"version {FORMAT_VERSION}: 8 bits, or 4 bits in groups of {GROUP})"
        )
    return qc


def refuse_int8_folder(folder: str | Path, tool: str) -> None:
    """Raise a clear error where ``tool`` would read an int8 folder as float weights (transformers
    only warns about an unknown ``quantization_config`` and loads the int8 codes as numbers)."""
    if folder_quantization(folder) is not None:
        raise ValueError(
            f"{folder} is a {QUANT_METHOD} folder (int8/int4 weights); {tool} cannot load it: use hexamer "
            "(Carbon.from_pretrained) or the float checkpoint it was quantized from"
        )


def _activation_dtype_for(dtype: object) -> torch.dtype:
    """A quantized folder's activation dtype from the user's ``dtype`` (float names pick it)."""
    mode = lowbit_mode(dtype)
    if mode is not None:
        return mode[1]
    if dtype is None or dtype == "auto":
        return torch.float32
    return resolve_dtype(dtype, _NO_CONFIG)  # type: ignore[arg-type]


class _NoConfig:
    dtype = None


_NO_CONFIG = _NoConfig()


def load_int8(
    folder: Path, config: ModelConfig, qconfig: dict[str, Any] | None, dtype: object, device: torch.device
) -> tuple[LlamaModel, ModelConfig]:
    """``load_model``'s quantized branch: a quantized folder (``qconfig``) read as stored, or a
    float folder quantized while loading (from float32, whatever the activation dtype). ``dtype``
    names the mode (:data:`LOWBIT_DTYPES`); a quantized folder's own width must agree with it."""
    activations = _activation_dtype_for(dtype)
    mode = lowbit_mode(dtype)
    if qconfig is None:
        assert mode is not None
        model, config = load_float_model(folder, dtype=torch.float32, device="cpu")
        quantize_model(model, activations, bits=mode[0], int8_activations=mode[2])
        return model.to(device).eval(), config
    bits = int(qconfig["bits"])
    if mode is not None and mode[0] != bits:
        raise ValueError(
            f"{folder} holds int{bits} weights; dtype {dtype!r} asks for int{mode[0]} (use the float "
            f"checkpoint, or dtype 'auto'/'{'int4' if bits == 4 else 'int8'}')"
        )
    model = _load_quantized_folder(folder, config, activations, device, bits)
    if mode is not None and mode[2]:
        for _, parent, attr in _decoder_linear_slots(model):
            getattr(parent, attr).quantize_activations = True
    return model, config


def int8_weight_bytes(config: ModelConfig, activations: torch.dtype, bits: int = 8) -> int:
    """Bytes a quantized model of ``config`` holds: per projection weight one (int8) or half
    (int4, rows padded to whole groups), four per output channel's scale (int8) or two per group
    (int4), everything else (embeddings, head, norms, biases) in ``activations``."""
    h, f = config.hidden_size, config.intermediate_size
    q = config.num_attention_heads * config.head_dim
    kv = config.num_key_value_heads * config.head_dim
    codes = config.num_hidden_layers * (2 * h * q + 2 * h * kv + 3 * h * f)
    itemsize = torch.empty((), dtype=activations).element_size()
    rest = (parameter_count(config) - codes) * itemsize
    if bits == 4:
        hp, qp, fp = (padded_in_features(n) for n in (h, q, f))
        padded = config.num_hidden_layers * ((q + 2 * kv + 2 * f) * hp + h * qp + h * fp)
        return padded // 2 + 2 * (padded // GROUP) + rest
    scales = config.num_hidden_layers * (q + 2 * kv + h + 2 * f + h)
    return codes + 4 * scales + rest


def _load_quantized_folder(
    folder: Path, config: ModelConfig, activations: torch.dtype, device: torch.device, bits: int = 8
) -> LlamaModel:
    """Read a quantized folder the way ``load_model`` reads a float one: the file's header is
    checked against its size, every name, shape and dtype against ``config.json``, and the
    weights' size against the free memory, all before the first tensor is read."""

    file = folder / QUANTIZED_FILE
    if not os.path.lexists(file):
        raise FileNotFoundError(f"{folder} is a {QUANT_METHOD} folder but has no {QUANTIZED_FILE}")
    header = read_safetensors_header(checked_file(file, folder))
    packed = (  # int4 rows hold two codes per byte: their shapes are checked below, against config.json
        {n for n in header if n.endswith(".weight") and n.split(".")[-2] in QUANTIZED_MODULES}
        if bits == 4
        else set()
    )
    check_config_matches_headers(folder, config, {file: {n: h for n, h in header.items() if n not in packed}})
    with torch.device("meta"):
        model = LlamaModel(config)
        for _, parent, attr in _decoder_linear_slots(model):
            lin = getattr(parent, attr)
            bias = None if lin.bias is None else torch.empty(lin.out_features)
            if bits == 4:
                kp = padded_in_features(lin.in_features)
                codes = torch.empty(lin.out_features, kp // 2, dtype=torch.uint8)
                scales = torch.empty(lin.out_features, kp // GROUP, dtype=torch.float16)
                setattr(parent, attr, Int4Linear(codes, scales, lin.in_features, bias))
            else:
                q = torch.empty(lin.out_features, lin.in_features, dtype=torch.int8)
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
    storage = {"float": {"F64", "F32", "F16", "BF16"}, "int8": {"I8"} if bits == 8 else {"U8"}}
    storage["scale"] = {"F32"} if bits == 8 else {"F16"}
    names: list[str] = []
    for name in sorted(header):
        if name.endswith("rotary_emb.inv_freq") or (config.tie_word_embeddings and name == "lm_head.weight"):
            continue
        if name not in expected:
            raise ValueError(f"unexpected tensor '{name}' in {file} (not part of this int{bits} checkpoint)")
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
    need = int8_weight_bytes(config, activations, bits)
    check_fits(
        need,
        device,
        f"{folder}: {parameter_count(config):,} parameters in int{bits} with "
        f"{str(activations).removeprefix('torch.')} activations ({format_bytes(need)})",
        "free memory or use a smaller model",
    )
    try:
        for name, tensor in read_tensors(file, names):
            attr_path, _, kind = expected[name]
            if kind != "float":
                check_finite_weight(tensor, name, file)
            if kind == "scale" and bits == 8 and not (tensor > 0).all():
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
    except OSError as exc:
        raise ValueError(f"{file} could not be read ({exc})") from None
    return model.to(device).eval()


#: safetensors dtype names -> torch dtypes (those a quantized folder may hold).
_TORCH_DTYPES = {
    "U8": torch.uint8, "I8": torch.int8, "F16": torch.float16, "BF16": torch.bfloat16,
    "F32": torch.float32, "F64": torch.float64,
}  # fmt: skip


def read_tensors(file: Path, names: list[str]) -> Iterator[tuple[str, torch.Tensor]]:
    """Each of ``names`` from the safetensors ``file`` (header already validated by
    ``read_safetensors_header``), read into memory of its own with plain reads, not views of a
    mapping of the file: a mapped file keeps every page read so far in the process's RSS while
    any tensor still views it (the bf16 embedding would keep the 8B int4 codes' 4 GB of pages
    counted after they were packed)."""
    with open(file, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        for name in names:
            info = header[name]
            start, end = info["data_offsets"]
            tensor = torch.empty(end - start, dtype=torch.uint8)
            f.seek(8 + n + start)
            if f.readinto(memoryview(tensor.numpy())) != end - start:
                raise OSError(f"tensor '{name}' is truncated")
            yield name, tensor.view(_TORCH_DTYPES[info["dtype"]]).reshape(info["shape"])


def quantized_tensors(model: LlamaModel, float_dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """The safetensors contents of a quantized folder for ``model`` (its projections already
    :class:`Int8Linear` or :class:`~hexamer.model.lowbit.Int4Linear`, or their CPU panel forms):
    Hugging Face names, int8 codes + float32 scales (int4: packed codes + float16 group scales),
    the rest in ``float_dtype``."""
    tensors: dict[str, torch.Tensor] = {}
    for name, p in model.named_parameters():  # a tied head appears once, as the embedding
        hf = name if name.startswith("lm_head.") else f"model.{name}"
        tensors[hf] = p.detach().to(float_dtype).contiguous()
    for name, parent, attr in _decoder_linear_slots(model):
        lin = getattr(parent, attr)
        if not hasattr(lin, "weight_scale"):
            raise ValueError(f"{name} is not quantized")
        scale = lin.weight_scale
        tensors[f"model.{name}.weight"] = lin.weight.contiguous()
        tensors[f"model.{name}.{SCALE_SUFFIX}"] = (
            scale if scale.dtype == torch.float16 else scale.float()
        ).contiguous()
    return tensors


def quantize_folder(source: str | Path, out: str | Path, bits: int = 8) -> Path:
    """Write an int8 (``bits=8``) or int4 (``bits=4``) copy of the float checkpoint folder ``source`` to ``out`` (which must not
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
    if bits not in (8, 4):
        raise ValueError(f"bits must be 8 or 4, got {bits}")
    quantize_model(model, torch.float32, bits=bits)
    tensors = quantized_tensors(model, float_dtype)
    del model
    raw["quantization_config"] = quantization_config(config.dtype, bits)
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
                raise RuntimeError(f"{name}: the written int{bits} weight does not load back")
        del check
        if out.exists():
            out.rmdir()
        staging.rename(out)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return out
