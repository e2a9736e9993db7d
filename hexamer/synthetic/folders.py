"""Build complete Carbon-format model folders locally, for tests, demos, benchmarks and training.

No weights can be downloaded in CI, so every test builds its own folder: a small byte-level BPE
trained with ``tokenizers`` (or the real Qwen3 BPE shipped with hexamer), the DNA block and
``<unused_i>`` pads laid out exactly as in Carbon relative to the BPE size, ``dna_config.json``, a
Llama ``config.json`` and random weights as safetensors (sharded with an index when asked). The folder
also holds a ``tokenizer.py`` that raises if anything ever imports it: hexamer must not run code from
a model folder.
"""

from __future__ import annotations

import json
import lzma
import os
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from hexamer.synthetic.qwen import QWEN3_ADDED_TOKENS, QWEN_SPLIT_PATTERN, qwen_tokenizer_json
from hexamer.tokenizer.layout import DnaLayout

# A short corpus (our own words) to train the tiny BPE: enough English and metadata-tag text for a
# few hundred merges, plus the species tags used by Carbon's evaluation prompts.
_CORPUS = """
Carbon is a family of DNA language models. A model reads genomes as six letter words and predicts the next word.
The tokenizer keeps ordinary text as byte pairs and switches to six-mers between the DNA tags.
Scientists score variants, generate sequences and embed genes with these models every day.
This tiny vocabulary exists only for tests: it learns common English words, numbers 0 1 2 3 4 5 6 7 8 9,
punctuation such as commas, full stops, colons: and semicolons; and the tags that describe a sequence.
<mammalian_species> <vertebrate_non_mammalian_species> <fungi_species> <plant_species>
<protozoan_species> <invertebrate_species> <gene_type> <promoter> <exon> <intron> <intergenic>
Hello world! Hello there, hi and hello again. The quick brown fox jumps over the lazy dog.
Gene regulation, chromatin, promoters and enhancers shape how cells read the genome.
"""

TINY_BPE_SIZE = 400  # BPE entries; Qwen3's 26 added tokens follow, then the DNA block


@dataclass(frozen=True)
class ModelShape:
    """Llama hyper-parameters of a Carbon-format model."""

    hidden_size: int = 64
    intermediate_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int | None = None
    tie_word_embeddings: bool = True
    max_position_embeddings: int = 2048
    rope_theta: float = 500_000.0
    rms_norm_eps: float = 1e-6
    rope_scaling: dict[str, Any] | None = field(default=None)


#: The published Carbon shapes (shared/spec/carbon.md §1); tiny is for tests.
SHAPES: dict[str, ModelShape] = {
    "tiny": ModelShape(),
    "500m": ModelShape(1024, 3072, 28, 16, 8, 64, True, 8192, 500_000.0),
    "3b": ModelShape(3072, 8448, 30, 32, 4, 96, True, 32768, 5_000_000.0),
    "8b": ModelShape(4096, 14336, 32, 32, 8, 128, False, 32768, 5_000_000.0),
}


@lru_cache(maxsize=4)
def tiny_bpe_json(vocab_size: int = TINY_BPE_SIZE) -> str:
    """A Qwen-style byte-level BPE trained on a small built-in corpus (deterministic)."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_SPLIT_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS.splitlines() * 4, trainer=trainer)
    data = json.loads(tok.to_str())
    vocab = data["model"]["vocab"]
    ordered = dict(sorted(vocab.items(), key=lambda kv: kv[1]))
    return json.dumps(qwen_tokenizer_json(ordered, data["model"]["merges"], added_base=len(ordered)))


@lru_cache(maxsize=1)
def qwen3_bpe_json() -> str:
    """The real Qwen3 base BPE of Carbon (151,643 tokens + 26 added), shipped xz-compressed."""
    blob = resources.files("hexamer.synthetic").joinpath("data/qwen3_bpe.json.xz").read_bytes()
    return lzma.decompress(blob).decode("utf-8")


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def write_tokenizer_files(
    out: Path,
    bpe: Literal["tiny", "qwen3"] = "tiny",
    *,
    auto_dna_tags: bool = False,
    model_max_length: int = 2048,
    list_dna_in_tokenizer_json: bool = False,
) -> DnaLayout:
    """Write the tokenizer side of a Carbon folder and return its DNA layout.

    ``list_dna_in_tokenizer_json`` also lists the DNA block as added tokens in ``tokenizer.json``
    (some saves do that); hexamer must give the same ids either way.
    """
    data = json.loads(tiny_bpe_json() if bpe == "tiny" else qwen3_bpe_json())
    base = len(data["model"]["vocab"]) + len(data["added_tokens"])
    layout = DnaLayout(dna_start_id=base)
    if list_dna_in_tokenizer_json:
        names = list(layout.special_tokens) + list(layout.kmers) + layout.unused_tokens()
        data["added_tokens"] += [
            {
                "id": base + i,
                "content": name,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for i, name in enumerate(names)
        ]
    eos = QWEN3_ADDED_TOKENS[0][0]
    _write_json(out / "tokenizer.json", data)
    _write_json(out / "dna_config.json", layout.dna_config(auto_dna_tags))
    _write_json(
        out / "tokenizer_config.json",
        {
            # what the official checkpoints carry: transformers would import tokenizer.py from here
            "tokenizer_class": "HybridDNATokenizer",
            "auto_map": {"AutoTokenizer": ["tokenizer.HybridDNATokenizer", None]},
            "k": layout.k,
            "auto_dna_tags": auto_dna_tags,
            "eos_token": eos,
            "pad_token": eos,
            "model_max_length": model_max_length,
            "clean_up_tokenization_spaces": False,
        },
    )
    _write_json(out / "special_tokens_map.json", {"eos_token": eos, "pad_token": eos})
    _write_json(out / "added_tokens.json", {n: base + i for i, n in enumerate(layout.special_tokens)})
    (out / "tokenizer.py").write_text(
        '"""Stand-in for the remote-code tokenizer of real Carbon folders."""\n'
        "raise RuntimeError('hexamer must never execute code from a model folder')\n",
        encoding="utf-8",
    )
    return layout


def llama_config(layout: DnaLayout, shape: ModelShape, eos_id: int) -> dict[str, Any]:
    """A ``config.json`` for ``LlamaForCausalLM`` with Carbon's vocabulary layout."""
    head_dim = shape.head_dim or shape.hidden_size // shape.num_attention_heads
    config: dict[str, Any] = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": layout.vocab_size,
        "hidden_size": shape.hidden_size,
        "intermediate_size": shape.intermediate_size,
        "num_hidden_layers": shape.num_hidden_layers,
        "num_attention_heads": shape.num_attention_heads,
        "num_key_value_heads": shape.num_key_value_heads,
        "head_dim": head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": shape.max_position_embeddings,
        "rms_norm_eps": shape.rms_norm_eps,
        "rope_theta": shape.rope_theta,
        "rope_scaling": shape.rope_scaling,
        "tie_word_embeddings": shape.tie_word_embeddings,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "mlp_bias": False,
        "initializer_range": 0.02,
        "bos_token_id": None,
        "eos_token_id": eos_id,
        "pad_token_id": eos_id,
        "torch_dtype": "float32",
        "use_cache": True,
    }
    return config


def random_llama_weights(config: dict[str, Any], seed: int = 0, dtype: Any = None) -> dict[str, Any]:
    """Random weights under Hugging Face Llama names. Norm weights are perturbed away from 1 so a
    parity test would notice a missing or misplaced norm."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    dtype = dtype or torch.float32
    h, f, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    hd = config["head_dim"]
    nq, nkv = config["num_attention_heads"], config["num_key_value_heads"]
    std = config.get("initializer_range", 0.02)

    def normal(*shape: int) -> Any:
        return (torch.randn(*shape, generator=gen) * std).to(dtype)

    def norm_weight() -> Any:
        return (1.0 + 0.1 * torch.randn(h, generator=gen)).to(dtype)

    weights: dict[str, Any] = {"model.embed_tokens.weight": normal(v, h)}
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        weights[p + "input_layernorm.weight"] = norm_weight()
        weights[p + "self_attn.q_proj.weight"] = normal(nq * hd, h)
        weights[p + "self_attn.k_proj.weight"] = normal(nkv * hd, h)
        weights[p + "self_attn.v_proj.weight"] = normal(nkv * hd, h)
        weights[p + "self_attn.o_proj.weight"] = normal(h, nq * hd)
        weights[p + "post_attention_layernorm.weight"] = norm_weight()
        weights[p + "mlp.gate_proj.weight"] = normal(f, h)
        weights[p + "mlp.up_proj.weight"] = normal(f, h)
        weights[p + "mlp.down_proj.weight"] = normal(h, f)
    weights["model.norm.weight"] = norm_weight()
    if not config["tie_word_embeddings"]:
        weights["lm_head.weight"] = normal(v, h)
    return weights


def save_safetensors(weights: dict[str, Any], out: Path, shards: int = 1) -> None:
    """``model.safetensors``, or ``shards`` files plus ``model.safetensors.index.json``."""
    from safetensors.torch import save_file

    if shards <= 1:
        save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
        return
    names = list(weights)
    per = -(-len(names) // shards)
    weight_map: dict[str, str] = {}
    total = 0
    for s in range(shards):
        chunk = names[s * per : (s + 1) * per]
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        save_file({n: weights[n] for n in chunk}, str(out / fname), metadata={"format": "pt"})
        for n in chunk:
            weight_map[n] = fname
            total += weights[n].numel() * weights[n].element_size()
    _write_json(
        out / "model.safetensors.index.json", {"metadata": {"total_size": total}, "weight_map": weight_map}
    )


def build_carbon_folder(
    out: str | os.PathLike[str],
    *,
    shape: str | ModelShape = "tiny",
    bpe: Literal["tiny", "qwen3"] = "tiny",
    seed: int = 0,
    shards: int = 1,
    weights: bool = True,
    auto_dna_tags: bool = False,
    list_dna_in_tokenizer_json: bool = False,
    dtype: str = "float32",
    **shape_overrides: Any,
) -> Path:
    """Write a complete Carbon-format model folder and return its path.

    ``shape`` is ``tiny`` (tests), ``500m``/``3b``/``8b`` (the published shapes, for benchmarks) or a
    :class:`ModelShape`; keyword overrides change single fields (``num_hidden_layers=1``, ...).
    ``bpe='qwen3'`` uses the real Carbon text vocabulary (DNA block at 151,669, vocab 155,776).
    """
    import dataclasses

    import torch

    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    base_shape = SHAPES[shape] if isinstance(shape, str) else shape
    model_shape = dataclasses.replace(base_shape, **shape_overrides) if shape_overrides else base_shape
    layout = write_tokenizer_files(
        folder,
        bpe,
        auto_dna_tags=auto_dna_tags,
        model_max_length=model_shape.max_position_embeddings,
        list_dna_in_tokenizer_json=list_dna_in_tokenizer_json,
    )
    eos_id = layout.dna_start_id - len(QWEN3_ADDED_TOKENS)  # <|endoftext|>
    config = llama_config(layout, model_shape, eos_id)
    config["torch_dtype"] = dtype
    _write_json(folder / "config.json", config)
    _write_json(
        folder / "generation_config.json",
        {"eos_token_id": eos_id, "pad_token_id": eos_id, "do_sample": False},
    )
    (folder / "README.md").write_text(
        "# Carbon-format test model\n\nRandom weights built by `hexamer.synthetic.build_carbon_folder`; "
        "not a trained model.\n",
        encoding="utf-8",
    )
    if weights:
        tensors = random_llama_weights(config, seed=seed, dtype=getattr(torch, dtype))
        save_safetensors(tensors, folder, shards=shards)
    return folder


def build_carbon_folder_once(target: str | os.PathLike[str], **options: Any) -> Path:
    """``build_carbon_folder(target, **options)`` unless ``target`` is already complete.

    The folder is built in a hidden sibling and renamed into place, so an interrupted build never
    leaves a half-written folder that later runs would take for a finished one.
    """
    import shutil
    import tempfile

    folder = Path(target)
    if (folder / "config.json").is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        build_carbon_folder(staging, **options)
        try:
            staging.rename(folder)
        except OSError:  # another process finished first
            if not (folder / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder
