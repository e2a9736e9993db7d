"""The model a run starts from: a new random Carbon-layout Llama, or an existing folder to fine-tune.

A new model gets the real Carbon vocabulary layout (BPE, then ``<dna>``, ``</dna>``, ``<oov>``, the
4,096 6-mers in ATCG order and the ``<unused_i>`` pads) with either the small test BPE or the real
Qwen3 BPE, so everything hexamer (and ``transformers``) reads a trained checkpoint exactly like a
Carbon one. Shapes come from :data:`hexamer.synthetic.SHAPES` (``tiny``, and the published 500M shape).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from hexamer.fns import kmer_digits
from hexamer.model import LlamaModel, ModelConfig, load_model
from hexamer.model.config import read_config_json
from hexamer.model.quant import folder_quantization
from hexamer.synthetic import QWEN3_ADDED_TOKENS, SHAPES, ModelShape, llama_config, write_tokenizer_files
from hexamer.tokenizer import CarbonTokenizer
from hexamer.train.copy_circuit import check_circuit_shape, plant_copy_circuit

__all__ = [
    "StartingPoint",
    "check_copy_circuit_shape",
    "compositional_kmer_rows",
    "init_weights",
    "new_model",
    "new_model_config",
    "new_model_shape",
    "starting_point",
]

_SHAPE_OF_INIT = {"tiny": "tiny", "500m-shape": "500m"}
_DEFAULT_BPE = {"tiny": "tiny", "500m-shape": "qwen3"}


@dataclass
class StartingPoint:
    """A trainable fp32 model with its ``config.json`` contents and tokenizer."""

    model: LlamaModel
    hf_config: dict[str, Any]  # written back as config.json with every checkpoint
    tokenizer: CarbonTokenizer
    source: str  # 'tiny', '500m-shape' or the folder fine-tuned


def new_model_shape(init: str = "tiny", overrides: dict[str, Any] | None = None) -> ModelShape:
    """The shape of a new model: the ``init`` shape with ``overrides`` (see :func:`new_model_config`)."""
    if init not in _SHAPE_OF_INIT:
        raise ValueError(f"unknown init {init!r}: use {', '.join(_SHAPE_OF_INIT)} or a model folder")
    shape = SHAPES[_SHAPE_OF_INIT[init]]
    names = {
        "hidden_size": "hidden_size",
        "intermediate_size": "intermediate_size",
        "num_layers": "num_hidden_layers",
        "num_heads": "num_attention_heads",
        "num_kv_heads": "num_key_value_heads",
        "context_length": "max_position_embeddings",
        "rope_theta": "rope_theta",
        "tie_embeddings": "tie_word_embeddings",
    }
    changes = {names[k]: v for k, v in (overrides or {}).items() if v is not None}
    if "hidden_size" in changes or "num_attention_heads" in changes:
        changes["head_dim"] = None  # derive it from the new hidden size / heads
    shape = dataclasses.replace(shape, **changes)
    if shape.head_dim is None and shape.hidden_size % shape.num_attention_heads:
        raise ValueError(
            f"hidden_size {shape.hidden_size} is not divisible by num_heads {shape.num_attention_heads}"
        )
    return shape


def check_copy_circuit_shape(init: str, overrides: dict[str, Any] | None = None) -> None:
    """Raise ValueError unless the new model ``init`` + ``overrides`` can hold the copy circuit
    (nothing allocated: a run checks this before it reads its data)."""
    check_circuit_shape(new_model_shape(init, overrides))


def new_model_config(
    init: str = "tiny", bpe: str = "auto", overrides: dict[str, Any] | None = None
) -> tuple[dict[str, Any], CarbonTokenizer]:
    """``config.json`` contents and tokenizer of a new Carbon-layout model.

    ``overrides`` may set ``hidden_size``, ``intermediate_size``, ``num_layers``, ``num_heads``,
    ``num_kv_heads``, ``context_length``, ``rope_theta``, ``tie_embeddings`` (``None`` = keep).
    """
    shape = new_model_shape(init, overrides)
    vocab = _DEFAULT_BPE[init] if bpe == "auto" else bpe
    if vocab not in ("tiny", "qwen3"):
        raise ValueError(f"bpe must be 'auto', 'tiny' or 'qwen3', got {bpe!r}")
    with tempfile.TemporaryDirectory(prefix="hexamer-tok-") as tmp:
        layout = write_tokenizer_files(Path(tmp), vocab, model_max_length=shape.max_position_embeddings)  # type: ignore[arg-type]
        tokenizer = CarbonTokenizer.from_pretrained(tmp)
    tokenizer.name_or_path = None  # the temporary folder is gone: save_pretrained writes the files
    eos_id = layout.dna_start_id - len(QWEN3_ADDED_TOKENS)  # <|endoftext|>, as in Carbon
    hf_config = llama_config(layout, shape, eos_id)
    ModelConfig.from_dict(hf_config)  # validate (heads vs KV heads, ...) before allocating anything
    return hf_config, tokenizer


def init_weights(model: LlamaModel, seed: int, std: float = 0.02) -> None:
    """Normal(0, std) matrices, unit norms; residual output projections scaled by 1/sqrt(2 layers)
    so the residual stream does not grow with depth (the usual GPT-2/Llama recipe)."""
    gen = torch.Generator().manual_seed(seed)
    depth_scale = 1.0 / math.sqrt(2 * max(1, model.config.num_hidden_layers))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.fill_(1.0)
                continue
            scale = depth_scale if name.endswith(("o_proj.weight", "down_proj.weight")) else 1.0
            p.copy_(torch.randn(p.shape, generator=gen) * (std * scale))


def compositional_kmer_rows(model: LlamaModel, kmer_start: int, k: int, seed: int, std: float = 0.02) -> None:
    """Give every k-mer row of the embedding (and of an untied head) the sum of one random vector
    per (position, base): ``E[v] = sum_j P[j, v_j]``.

    From-scratch models otherwise learn 4,096 unrelated k-mer vectors, each seen rarely. With this
    start, k-mers sharing bases are similar from step 0, and a tied head's logit of a k-mer is a sum
    of per-position base scores - the factorised form that FNS marginals assume - so the model can
    learn base statistics before it has seen most k-mers. Row norms match the random rows.
    """
    gen = torch.Generator().manual_seed(seed + 1)
    hidden = model.config.hidden_size
    digits = kmer_digits(k)  # (4**k, k), ATCG order
    rows = slice(kmer_start, kmer_start + 4**k)
    heads = [model.embed_tokens.weight] + ([] if model.lm_head is None else [model.lm_head.weight])
    with torch.no_grad():
        for weight in heads:
            parts = torch.randn(k, 4, hidden, generator=gen) * (std / math.sqrt(k))
            weight[rows] = parts[torch.arange(k), digits].sum(1).to(weight.dtype)


def new_model(
    hf_config: dict[str, Any], seed: int, *, kmer_start: int | None = None, k: int = 6
) -> LlamaModel:
    """A randomly initialised float32 :class:`LlamaModel` for ``hf_config``; with ``kmer_start``,
    its k-mer rows start compositional (:func:`compositional_kmer_rows`)."""
    model = LlamaModel(ModelConfig.from_dict(hf_config))
    std = float(hf_config.get("initializer_range", 0.02))
    init_weights(model, seed, std=std)
    if kmer_start is not None:
        compositional_kmer_rows(model, kmer_start, k, seed, std=std)
    return model


def starting_point(
    init: str,
    *,
    bpe: str = "auto",
    seed: int = 0,
    overrides: dict[str, Any] | None = None,
    kmer_init: str = "compositional",
    copy_circuit: bool = False,
) -> StartingPoint:
    """The model a run starts from: ``tiny``/``500m-shape`` (new) or a Carbon-format folder.

    ``kmer_init`` (new models): ``compositional`` or ``random`` k-mer embedding rows;
    ``copy_circuit`` (new models): layers 0-1 set to copy from context
    (:func:`hexamer.train.copy_circuit.plant_copy_circuit`).
    """
    if init in _SHAPE_OF_INIT:
        if kmer_init not in ("compositional", "random"):
            raise ValueError(f"kmer_init must be 'compositional' or 'random', got {kmer_init!r}")
        if copy_circuit:
            check_copy_circuit_shape(init, overrides)
        hf_config, tokenizer = new_model_config(init, bpe, overrides)
        layout = tokenizer.layout
        start = layout.kmer_start if kmer_init == "compositional" else None
        model = new_model(hf_config, seed, kmer_start=start, k=layout.k)
        if copy_circuit:
            plant_copy_circuit(model, layout.kmer_start, layout.k)
        return StartingPoint(model, hf_config, tokenizer, init)
    if copy_circuit:
        raise ValueError("copy_circuit only applies to a new model; a folder keeps its weights")
    folder = Path(init)
    if not folder.is_dir():
        raise ValueError(
            f"unknown init {init!r}: use {' or '.join(_SHAPE_OF_INIT)} for a new model, "
            "or the path of a Carbon-format model folder to fine-tune"
        )
    if folder_quantization(folder) is not None:  # int8 codes cannot be trained
        raise ValueError(f"{folder} is an int8-quantized folder; fine-tune the float checkpoint it came from")
    hf_config = read_config_json(folder / "config.json")
    model, _ = load_model(folder, dtype=torch.float32)
    for p in model.parameters():  # load_model returns a frozen inference model
        p.requires_grad_(True)
    model.train()
    tokenizer = CarbonTokenizer.from_pretrained(folder)
    if model.config.vocab_size != len(tokenizer):
        raise ValueError(
            f"{folder}: config vocab_size {model.config.vocab_size} != tokenizer {len(tokenizer)}"
        )
    return StartingPoint(model, copy.deepcopy(hf_config), tokenizer, str(folder))


def parameter_count(model: nn.Module) -> int:
    """Number of trainable parameters (tied embeddings counted once)."""
    return sum(p.numel() for p in model.parameters())
