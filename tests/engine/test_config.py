"""EngineConfig: defaults, range checks naming the field, derived configs, and that every part of
the engine (and Carbon, and the server) reads the one config it was built with."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from hexamer import Carbon
from hexamer.engine import Engine, EngineConfig
from hexamer.engine.config import MAX_BATCH_SIZE
from hexamer.model import RopeConfig


def test_defaults() -> None:
    config = EngineConfig()
    assert config.as_dict() == {
        "max_batch_size": 16,
        "max_model_len": None,
        "kv_cache_bytes": None,
        "prefill_token_budget": 8192,
        "prefill_chunk_tokens": None,
        "dna_only_logits": True,
        "static_decode": None,
        "compile_decode": False,
        "prefix_caching": True,
    }


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_batch_size", 0),
        ("max_batch_size", MAX_BATCH_SIZE + 1),
        ("max_batch_size", 2.5),
        ("max_batch_size", True),
        ("max_batch_size", None),
        ("max_model_len", 0),
        ("max_model_len", 2**40),
        ("kv_cache_bytes", -1),
        ("kv_cache_bytes", "8GiB"),
        ("prefill_token_budget", 0),
        ("prefill_chunk_tokens", 0),
        ("dna_only_logits", 1),
        ("dna_only_logits", None),
        ("static_decode", "yes"),
        ("compile_decode", None),
    ],
)
def test_bad_values_are_refused_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=f"engine option {field} must"):
        EngineConfig(**{field: value})  # type: ignore[arg-type]


def test_limits_and_numpy_integers_are_accepted() -> None:
    config = EngineConfig(
        max_batch_size=MAX_BATCH_SIZE,
        max_model_len=1,
        kv_cache_bytes=1,
        prefill_token_budget=np.int64(1),  # type: ignore[arg-type]
        prefill_chunk_tokens=1,
        static_decode=False,
        compile_decode=True,
    )
    assert config.max_batch_size == MAX_BATCH_SIZE and config.prefill_token_budget == 1


def test_frozen_and_replace() -> None:
    config = EngineConfig(max_batch_size=4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.max_batch_size = 8  # type: ignore[misc]
    derived = config.replace(max_batch_size=8, compile_decode=True)
    assert (derived.max_batch_size, derived.compile_decode) == (8, True)
    assert (config.max_batch_size, config.compile_decode) == (4, False)  # unchanged
    assert dataclasses.replace(config, kv_cache_bytes=2**20).kv_cache_bytes == 2**20
    with pytest.raises(ValueError, match="engine option max_batch_size"):
        config.replace(max_batch_size=0)  # checked like a new one
    assert config == EngineConfig(max_batch_size=4) and hash(config) == hash(EngineConfig(max_batch_size=4))


def test_from_options() -> None:
    assert EngineConfig.from_options(max_batch_size=3) == EngineConfig(max_batch_size=3)
    base = EngineConfig(static_decode=True)
    assert EngineConfig.from_options(base) is base
    assert EngineConfig.from_options(base, max_batch_size=2) == EngineConfig(
        max_batch_size=2, static_decode=True
    )
    with pytest.raises(TypeError, match=r"unknown engine option.*max_batch.*known: max_batch_size"):
        EngineConfig.from_options(max_batch=2)


def test_carbon_builds_the_config_from_keywords_or_takes_one(tiny_folder: Path) -> None:
    by_keywords = Carbon.from_pretrained(tiny_folder, max_batch_size=3, prefill_token_budget=100)
    config = EngineConfig(max_batch_size=3, prefill_token_budget=100)
    given = Carbon.from_pretrained(tiny_folder, engine=config)
    assert by_keywords.engine_config == config and given.engine_config is config
    for carbon in (by_keywords, given):
        engine = carbon.engine
        assert engine.config == config
        assert engine.cache.max_rows == 3 and engine.scheduler.prefill_token_budget == 100
    with pytest.raises(TypeError, match="not both"):
        Carbon.from_pretrained(tiny_folder, engine=config, max_batch_size=4)
    with pytest.raises(TypeError, match="unknown engine option"):
        Carbon.from_pretrained(tiny_folder, max_batch=4)
    with pytest.raises(ValueError, match="engine option max_batch_size"):
        Carbon(given.model, given.tokenizer, max_batch_size=0)


def test_runner_reads_the_config(tiny_folder: Path) -> None:
    carbon = Carbon.from_pretrained(tiny_folder)
    config = EngineConfig(dna_only_logits=False, static_decode=True, prefill_chunk_tokens=40)
    runner = Engine(carbon.model, carbon.layout, config).runner
    assert (runner.dna_only_logits, runner.static_decode, runner.prefill_chunk_tokens) == (False, True, 40)
    assert not Engine(carbon.model, carbon.layout).runner.static_decode  # CPU default: off


def test_max_model_len_caps_generation(tiny_folder: Path) -> None:
    carbon = Carbon.from_pretrained(tiny_folder, max_model_len=8)
    assert carbon.engine.max_len == 8
    carbon.generate("ACGTAC", max_bp=30)  # 2 prompt tokens + 5 new ones fit
    with pytest.raises(ValueError, match="max_model_len of 8 tokens"):
        carbon.generate("ACGTAC", max_bp=60)
    roomy = Carbon.from_pretrained(tiny_folder, max_model_len=10**9)  # capped at the context
    assert roomy.engine.max_len == roomy.context_length


def test_with_rope_keeps_the_config(tiny_folder: Path) -> None:
    config = EngineConfig(max_batch_size=2, dna_only_logits=False)
    carbon = Carbon.from_pretrained(tiny_folder, engine=config)
    longer = carbon.with_rope(
        RopeConfig(rope_type="linear", factor=2.0),
        max_position_embeddings=2 * carbon.context_length,
    )
    assert longer.engine_config is config and longer.engine.config is config


def test_the_cli_bound_is_the_engine_bound() -> None:
    """``--batch-size`` / ``--max-num-seqs`` are refused by the CLI at the engine's own limit (the CLI
    keeps a copy so that parsing options never imports torch)."""
    from hexamer.cli import checks

    assert checks.MAX_BATCH_SIZE == MAX_BATCH_SIZE
