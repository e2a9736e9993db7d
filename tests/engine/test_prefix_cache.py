"""Prefix caching in the engine: prompts sharing a long prefix compute it once, decode exactly as
without the cache, and give every block back (cached blocks count as free and are evicted when
the pool needs them)."""

from __future__ import annotations

import random
from pathlib import Path

from hexamer import Carbon
from hexamer.engine import Engine, EngineConfig, SamplingParams
from hexamer.engine.kv_manager import kv_bytes_per_token
from hexamer.model.kv_blocks import BLOCK_SIZE


def _prompts(n: int, prefix_bp: int, tail_bp: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    prefix = "".join(rng.choice("ACGT") for _ in range(prefix_bp))
    return [prefix + "".join(rng.choice("ACGT") for _ in range(tail_bp)) for _ in range(n)]


def _run(
    carbon: Carbon, prompts: list[str], config: EngineConfig, **params: object
) -> tuple[list[str], Engine]:
    engine = Engine(carbon.model, carbon.layout, config)
    reqs = [
        engine.make_request(carbon.parse_prompt(p, i).ids, SamplingParams(max_bp=30, seed=i, **params))  # type: ignore[arg-type]
        for i, p in enumerate(prompts)
    ]
    engine.run(reqs)
    return [r.bases() for r in reqs], engine


def test_shared_prefix_is_computed_once_with_the_same_outputs(tiny_folder: Path) -> None:
    carbon = Carbon.from_pretrained(tiny_folder)
    prompts = _prompts(16, 1200, 60)  # a 200-token prefix: 12 full blocks shared, tails differ
    for params in ({"temperature": 0.0}, {"temperature": 1.0}):
        want, _ = _run(carbon, prompts, EngineConfig(max_batch_size=16, prefix_caching=False), **params)
        got, engine = _run(carbon, prompts, EngineConfig(max_batch_size=16), **params)
        assert got == want
        queried, hits = engine.prefix_cache_blocks
        # the first prompt computes the prefix, the 15 others find its 12 blocks
        assert hits == 15 * 12 and queried == 16 * ((len(carbon.parse_prompt(prompts[0], 0).ids) - 1) // 16)
        assert engine.kv_blocks_free == engine.kv_blocks_total  # cached blocks count as free


def test_prompt_tokens_computed_drop_at_least_fivefold(tiny_folder: Path) -> None:
    """64 prompts sharing a long prefix (6,000 bp, 1,000 tokens) with 60-bp tails: the prefill
    forwards compute under a fifth of the tokens they compute without the cache."""
    carbon = Carbon.from_pretrained(tiny_folder)
    prompts = _prompts(64, 6000, 60, seed=1)
    fed: dict[bool, int] = {}
    outputs: list[str] = []
    for caching in (False, True):
        engine = Engine(carbon.model, carbon.layout, EngineConfig(max_batch_size=64, prefix_caching=caching))
        seen: list[int] = []
        forward = engine.runner.model.forward

        def counting(ids, *args, _seen=seen, _forward=forward, **kw):  # type: ignore[no-untyped-def]
            if ids.shape[1] > 1:
                _seen.append(
                    int(kw["attention_mask"].sum()) if kw.get("attention_mask") is not None else ids.numel()
                )
            return _forward(ids, *args, **kw)

        engine.runner.model.forward = counting  # type: ignore[method-assign]
        try:
            reqs = [
                engine.make_request(carbon.parse_prompt(p, i).ids, SamplingParams(max_bp=6, temperature=0.0))
                for i, p in enumerate(prompts)
            ]
            engine.run(reqs)
        finally:
            del engine.runner.model.forward
        fed[caching] = sum(seen)
        if caching:
            assert [r.bases() for r in reqs] == outputs
        else:
            outputs = [r.bases() for r in reqs]
    assert fed[False] >= 5 * fed[True]


def test_cached_blocks_are_evicted_when_the_pool_needs_them(tiny_folder: Path) -> None:
    carbon = Carbon.from_pretrained(tiny_folder)
    per_block = kv_bytes_per_token(carbon.model) * BLOCK_SIZE
    config = EngineConfig(max_batch_size=2, max_model_len=160, kv_cache_bytes=12 * per_block)
    # three different 120-token prompts, two rows, 12 blocks: later prompts need the earlier ones'
    # cached blocks back; all finish, in order, with the outputs of a roomy engine
    prompts = [p for seed in range(3) for p in _prompts(1, 700, 0, seed=seed)]
    got, engine = _run(carbon, prompts, config, temperature=0.0)
    want, _ = _run(
        carbon,
        prompts,
        EngineConfig(max_batch_size=2, max_model_len=160, prefix_caching=False),
        temperature=0.0,
    )
    assert got == want and engine.kv_blocks_free == engine.kv_blocks_total == 12


def test_a_repeated_prompt_beside_new_ones_fits_a_cache_sized_to_them(tiny_folder: Path) -> None:
    """``generate`` sizes the cache to its longest request. A prompt that repeats an earlier one of
    the same call finds its blocks cached and feeds a short tail; left-padded beside prompts that
    found nothing, that padding would push its row past the cache (``KV cache full``), so it runs
    in a forward of its own width. Outputs equal those without the cache."""
    prompts = [_prompts(1, 300, 0, seed=s)[0] for s in range(16)]
    prompts[8] = prompts[0]
    out = {}
    for caching in (False, True):
        carbon = Carbon.from_pretrained(tiny_folder, max_batch_size=16, prefix_caching=caching)
        out[caching] = [g.sequence for g in carbon.generate(prompts, max_bp=30, temperature=0.0)]
        assert carbon.engine.kv_blocks_free == carbon.engine.kv_blocks_total
    assert out[True] == out[False]
    assert carbon.engine.prefix_cache_blocks[1] > 0
