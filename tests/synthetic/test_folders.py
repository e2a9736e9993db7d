"""The public folder builder lays out Carbon folders exactly, and transformers can load them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from hexamer.synthetic import CARBON_DNA_START_ID, SHAPES, build_carbon_folder
from hexamer.tokenizer import CarbonTokenizer
from hexamer.tokenizer.folder import TOKENIZER_FILES


def test_tiny_folder_layout(tiny_folder: Path, tok: CarbonTokenizer) -> None:
    names = {p.name for p in tiny_folder.iterdir()}
    assert names >= set(TOKENIZER_FILES) and "model.safetensors" in names
    config = json.loads((tiny_folder / "config.json").read_text())
    dna = json.loads((tiny_folder / "dna_config.json").read_text())
    tokenizer_json = json.loads((tiny_folder / "tokenizer.json").read_text())
    base = len(tokenizer_json["model"]["vocab"]) + len(tokenizer_json["added_tokens"])
    assert dna["dna_start_id"] == base == tok.layout.dna_start_id
    assert config["vocab_size"] == len(tok) and config["vocab_size"] % 128 == 0
    assert dna["dna_vocab_size"] == config["vocab_size"] - base
    assert tokenizer_json["added_tokens"][0]["content"] == "<|endoftext|>"
    assert config["eos_token_id"] == tok.eos_token_id == tokenizer_json["added_tokens"][0]["id"]


def test_real_vocab_folder_matches_carbon(real_vocab_folder: Path, real_tok: CarbonTokenizer) -> None:
    config = json.loads((real_vocab_folder / "config.json").read_text())
    assert config["vocab_size"] == 155_776
    assert real_tok.layout.dna_start_id == CARBON_DNA_START_ID == 151_669
    assert json.loads((real_vocab_folder / "dna_config.json").read_text())["dna_vocab_size"] == 4107


def test_sharded_weights_and_transformers_load(tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    folder = build_carbon_folder(tmp_path / "sharded", shards=3, tie_word_embeddings=False, seed=7)
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    shard_files = set(index["weight_map"].values())
    assert len(shard_files) == 3 and all((folder / f).is_file() for f in shard_files)
    assert "lm_head.weight" in index["weight_map"]
    model = transformers.LlamaForCausalLM.from_pretrained(folder)
    name = "model.layers.1.mlp.down_proj.weight"
    with safe_open(str(folder / index["weight_map"][name]), framework="pt") as f:
        assert torch.equal(model.state_dict()[name], f.get_tensor(name))
    ids = torch.tensor([[1, 2, 3]])
    assert model(ids).logits.shape == (1, 3, json.loads((folder / "config.json").read_text())["vocab_size"])


def test_published_shapes() -> None:
    assert SHAPES["3b"].head_dim == 96 and SHAPES["3b"].num_key_value_heads == 4
    assert not SHAPES["8b"].tie_word_embeddings
    assert SHAPES["500m"].num_hidden_layers == 28


def test_seeded_weights_are_reproducible(tmp_path: Path) -> None:
    a = build_carbon_folder(tmp_path / "a", seed=3)
    b = build_carbon_folder(tmp_path / "b", seed=3)
    assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()
    assert (a / "tokenizer.json").read_text() == (b / "tokenizer.json").read_text()
