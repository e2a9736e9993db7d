"""ModelConfig parsing: v4 and v5 config layouts, defaults, and clear errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from hexamer.model import ModelConfig, RopeConfig

BASE: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "vocab_size": 155776,
    "hidden_size": 3072,
    "intermediate_size": 8448,
    "num_hidden_layers": 30,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": 96,
    "hidden_act": "silu",
    "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-5,
    "rope_theta": 5_000_000.0,
    "rope_scaling": None,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
    "eos_token_id": 151643,
    "pad_token_id": 151643,
}


def parse(**changes: Any) -> ModelConfig:
    raw = {k: v for k, v in (BASE | changes).items() if v is not ...}
    return ModelConfig.from_dict(raw)


def test_carbon_3b_shaped_v4_config() -> None:
    c = parse()
    assert (c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim) == (3072, 32, 4, 96)
    assert c.num_kv_groups == 8
    assert c.rope == RopeConfig(rope_type="default", theta=5e6)
    assert c.rope_theta == 5e6
    assert c.tie_word_embeddings is True
    assert c.dtype == "bfloat16" and c.torch_dtype() is torch.bfloat16
    assert c.eos_token_ids == (151643,) and c.pad_token_id == 151643 and c.bos_token_id is None
    assert c.rms_norm_eps == 1e-5


def test_defaults_like_transformers() -> None:
    c = parse(
        num_key_value_heads=...,
        head_dim=...,
        hidden_act=...,
        rope_theta=...,
        rope_scaling=...,
        tie_word_embeddings=...,
        torch_dtype=...,
        rms_norm_eps=...,
        max_position_embeddings=...,
    )
    assert c.num_key_value_heads == 32
    assert c.head_dim == 3072 // 32
    assert c.rope == RopeConfig()
    assert c.rope.theta == 10_000.0
    assert c.tie_word_embeddings is False
    assert c.dtype is None and c.torch_dtype() is None
    assert c.rms_norm_eps == 1e-6 and c.max_position_embeddings == 2048


def test_v4_yarn_rope_scaling_with_type_alias() -> None:
    c = parse(
        max_position_embeddings=131072,
        rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768},
    )
    assert c.rope.rope_type == "yarn"
    assert c.rope.theta == 5e6  # top-level rope_theta carried into the rope parameters
    assert c.rope.factor == 4.0 and c.rope.original_max_position_embeddings == 32768
    assert c.rope.truncate is True and c.rope.attention_factor is None


def test_v5_rope_parameters() -> None:
    c = parse(
        rope_theta=...,
        rope_scaling=...,
        dtype="float32",
        torch_dtype=...,
        rope_parameters={
            "rope_type": "llama3",
            "rope_theta": 500000.0,
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
    )
    assert c.rope == RopeConfig(
        rope_type="llama3",
        theta=500000.0,
        factor=8.0,
        original_max_position_embeddings=8192,
        low_freq_factor=1.0,
        high_freq_factor=4.0,
    )
    assert c.dtype == "float32"


def test_rope_precedence_follows_transformers() -> None:
    # theta inside the dict wins over the top-level one; rope_scaling wins over rope_parameters.
    c = parse(rope_scaling={"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4})
    assert c.rope == RopeConfig(rope_type="linear", theta=1e4, factor=2.0)
    c = parse(
        rope_scaling={"rope_type": "linear", "factor": 2.0},
        rope_parameters={"rope_type": "default", "rope_theta": 7.0},
    )
    assert c.rope.rope_type == "linear" and c.rope.theta == 5e6


def test_yarn_fallbacks() -> None:
    # No original length -> max_position_embeddings; no factor -> ratio of the windows.
    c = parse(rope_scaling={"rope_type": "yarn", "factor": 4.0})
    assert c.rope.original_max_position_embeddings == 32768
    c = parse(
        max_position_embeddings=65536,
        rope_scaling={"rope_type": "yarn", "original_max_position_embeddings": 16384, "truncate": False},
    )
    assert c.rope.factor == 4.0 and c.rope.truncate is False


def test_eos_list_and_dtype_prefix() -> None:
    c = parse(eos_token_id=[1, 2], torch_dtype="torch.float16")
    assert c.eos_token_ids == (1, 2) and c.dtype == "float16"


def test_matches_transformers_llama_config_to_dict() -> None:
    transformers = pytest.importorskip("transformers")
    hf = transformers.LlamaConfig(
        vocab_size=300,
        hidden_size=96,
        intermediate_size=160,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=256,
        rope_parameters={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64},
        tie_word_embeddings=True,
    )
    c = ModelConfig.from_dict(hf.to_dict())
    assert (c.vocab_size, c.hidden_size, c.head_dim, c.num_key_value_heads) == (300, 96, 32, 2)
    assert c.rope.rope_type == "yarn" and c.rope.theta == 10_000.0 and c.rope.factor == 4.0
    assert c.tie_word_embeddings is True


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"hidden_act": "gelu"}, "'hidden_act' must be 'silu'"),
        ({"model_type": "mistral"}, "'model_type' is 'mistral'"),
        ({"architectures": ["GPT2LMHeadModel"]}, "only runs 'LlamaForCausalLM'"),
        ({"vocab_size": ...}, "missing required field 'vocab_size'"),
        ({"hidden_size": -4}, "'hidden_size' must be a positive integer"),
        ({"num_hidden_layers": True}, "'num_hidden_layers' must be a positive integer"),
        ({"num_key_value_heads": 5}, "multiple of 'num_key_value_heads' (5)"),
        ({"head_dim": ..., "hidden_size": 100}, "not divisible by 'num_attention_heads'"),
        ({"head_dim": 95}, "'head_dim' must be even"),
        ({"torch_dtype": "int8"}, "'torch_dtype' must be one of"),
        ({"rms_norm_eps": "small"}, "'rms_norm_eps' must be a positive number"),
        ({"tie_word_embeddings": "yes"}, "'tie_word_embeddings' must be true or false"),
        ({"rope_theta": 0}, "'rope_theta' must be a number > 1"),
        ({"rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}, "rope type 'dynamic' is not supported"),
        ({"rope_scaling": {"rope_type": "longrope"}}, "rope type 'longrope' is not supported"),
        ({"rope_scaling": {"rope_type": "linear"}}, "need 'factor'"),
        ({"rope_scaling": {"rope_type": "linear", "factor": -1}}, "'factor' must be a positive number"),
        (
            {"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "high_freq_factor": 4.0}},
            "need 'low_freq_factor'",
        ),
        ({"rope_scaling": {"rope_type": "yarn", "factor": 4, "truncate": "no"}}, "'truncate' must be true"),
        ({"partial_rotary_factor": 0.5}, "'partial_rotary_factor' must be 1.0"),
        ({"rope_scaling": "yarn"}, "must be an object"),
    ],
)
def test_errors_name_the_field(changes: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValueError) as info:
        parse(**changes)
    assert fragment in str(info.value)


def test_from_file_errors_name_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "config.json"
    with pytest.raises(FileNotFoundError, match=r"config\.json not found"):
        ModelConfig.from_file(missing)
    missing.write_text("{not json")
    with pytest.raises(ValueError, match="is not valid JSON"):
        ModelConfig.from_file(missing)
    missing.write_text(json.dumps(BASE | {"model_type": "gpt2"}))
    with pytest.raises(ValueError) as info:
        ModelConfig.from_file(missing)
    assert str(missing) in str(info.value) and "'model_type' is 'gpt2'" in str(info.value)
    missing.write_text(json.dumps(BASE))
    assert ModelConfig.from_file(missing) == ModelConfig.from_dict(BASE)


def test_from_file_refuses_what_is_not_a_config_file(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)  # reading it would block forever
    with pytest.raises(ValueError, match="not a regular file"):
        ModelConfig.from_file(fifo)
    fifo.unlink()
    fifo.write_bytes(b"\xff\xfe not utf-8")
    with pytest.raises(ValueError, match="is not valid JSON"):
        ModelConfig.from_file(fifo)
    with open(fifo, "wb") as f:
        f.truncate(17 * 2**20)  # sparse: no disk used
    with pytest.raises(ValueError, match=r"a config\.json is a few KB"):
        ModelConfig.from_file(fifo)


@pytest.mark.parametrize("value", [1e6, 10**12])
def test_huge_but_valid_integers_parse(value: float) -> None:
    """Absurd sizes are refused against the weights and the machine at load time
    (tests/model/test_checkpoint.py), not guessed at here."""
    assert parse(num_hidden_layers=value).num_hidden_layers == int(value)


def test_read_config_json_refuses_fifos_huge_files_and_outside_links_without_hanging(tmp_path: Path) -> None:
    """Every reader of a folder's config.json (training, the remote client, quantize) goes through
    read_config_json: a FIFO is refused by name before anything opens it, never read."""
    import os

    from hexamer.model.config import read_config_json
    from hexamer.testing.hangs import error_within

    folder = tmp_path / "model"
    folder.mkdir()
    config = folder / "config.json"
    os.mkfifo(config)
    error = error_within(lambda: read_config_json(config), what="reading a FIFO config.json")
    assert isinstance(error, ValueError) and "config.json is not a regular file" in str(error)
    config.unlink()
    (tmp_path / "elsewhere.json").write_text(json.dumps(BASE))
    config.symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(ValueError, match="outside the model folder"):
        read_config_json(config)
    config.unlink()
    with open(config, "wb") as f:
        f.truncate(17 * 2**20)
    with pytest.raises(ValueError, match=r"a config\.json is a few KB"):
        read_config_json(config)
    config.write_text("[1, 2]")
    with pytest.raises(ValueError, match="must hold a JSON object"):
        read_config_json(config)
    config.write_text(json.dumps(BASE))
    assert read_config_json(config) == BASE


def test_absurd_context_lengths_are_refused_naming_the_field(tmp_path: Path) -> None:
    from hexamer.model.config import MAX_POSITION_EMBEDDINGS

    assert parse(max_position_embeddings=MAX_POSITION_EMBEDDINGS).max_position_embeddings == 2**24
    with pytest.raises(
        ValueError, match=r"'max_position_embeddings' is 1,000,000,000,000, more than the 16,777,216"
    ):
        parse(max_position_embeddings=10**12)
    with pytest.raises(ValueError, match="'original_max_position_embeddings'"):
        parse(rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 10**12})
    path = tmp_path / "config.json"
    path.write_text(json.dumps(BASE | {"max_position_embeddings": 1e12}), encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{path}: 'max_position_embeddings'"):
        ModelConfig.from_file(path)
