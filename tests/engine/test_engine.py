"""Engine internals: static-shape decode, compiled decode, cache budget, cancellation, and the
serving door a server drives the engine through."""

from __future__ import annotations

from pathlib import Path

import pytest

from hexamer import Carbon
from hexamer.engine import (
    ContextExceeded,
    Engine,
    EngineConfig,
    Request,
    SamplingParams,
    SpecConfig,
    SpeculationRefused,
)
from hexamer.model.kv_blocks import BLOCK_SIZE

PROMPTS = ["ACGTAC", "TTGACATTGACATTGACA", "GGGCCCAAATTT" * 3, "A", "<dna>", "CATCATCATCATCAT"]
LENGTHS = [5, 30, 12, 7, 19, 1]


def _run(carbon: Carbon, **kwargs: object) -> list[str]:
    gens = carbon.generate(PROMPTS[:3], max_bp=25, **kwargs)
    out = [g.sequence for g in gens]
    reqs = []
    for i, (p, n) in enumerate(zip(PROMPTS, LENGTHS, strict=True)):
        pp = carbon.parse_prompt(p, i)
        reqs.append(Request(pp.ids, SamplingParams(max_bp=n, seed=10 + i, top_p=0.9), forced=pp.forced))
    carbon.engine.run(reqs)
    return out + [r.bases() for r in reqs]


@pytest.fixture(scope="module")
def reference(tiny_folder: Path) -> dict[str, list[str]]:
    carbon = Carbon.from_pretrained(tiny_folder, max_batch_size=2)
    return {"greedy": _run(carbon, temperature=0), "sampled": _run(carbon, seed=7, mode="token")}


def test_static_decode_equals_dynamic(tiny_folder: Path, reference: dict[str, list[str]]) -> None:
    carbon = Carbon.from_pretrained(tiny_folder, max_batch_size=2, static_decode=True)
    assert carbon.engine.runner.static_decode
    assert _run(carbon, temperature=0) == reference["greedy"]
    assert _run(carbon, seed=7, mode="token") == reference["sampled"]


@pytest.mark.slow
def test_compiled_decode_equals_dynamic(tiny_folder: Path, reference: dict[str, list[str]]) -> None:
    carbon = Carbon.from_pretrained(tiny_folder, max_batch_size=2, compile_decode=True)
    assert _run(carbon, temperature=0) == reference["greedy"]


def test_kv_budget(tiny_folder: Path) -> None:
    from hexamer.engine.kv_manager import kv_bytes_per_token

    carbon = Carbon.from_pretrained(tiny_folder, max_batch_size=8)
    per_token = kv_bytes_per_token(carbon.model)
    # room for two blocks, one per request (2 + 30 // 6 + 1 tokens): the run completes, two at a time
    budget = Carbon.from_pretrained(tiny_folder, max_batch_size=8, kv_cache_bytes=2 * per_token * BLOCK_SIZE)
    out = budget.generate(["ACGTAC"] * 5, max_bp=30, seed=1)
    cache = budget.engine.cache.cache
    assert cache is not None and cache.batch_size == 5 and cache.blocks_total == 2
    assert cache.blocks_free == 2 and budget.engine.kv_blocks_reserved == 0  # every block came back
    assert [g.sequence for g in out] == [
        g.sequence for g in carbon.generate(["ACGTAC"] * 5, max_bp=30, seed=1)
    ]
    tiny_budget = Carbon.from_pretrained(tiny_folder, kv_cache_bytes=per_token * BLOCK_SIZE)
    with pytest.raises(ValueError, match="cannot hold one sequence"):
        tiny_budget.generate("ACGTAC", max_bp=120)


def test_cancel_frees_the_row(tiny_folder: Path) -> None:
    carbon = Carbon.from_pretrained(tiny_folder, max_batch_size=2)
    engine = carbon.engine
    engine.cache.ensure(64, 2)
    reqs = [
        Request(carbon.parse_prompt("ACGTAC", i).ids, SamplingParams(max_bp=60, seed=i)) for i in range(3)
    ]
    for r in reqs:
        engine.add(r)
    engine.step()  # prefill of the first two
    assert sorted(r.row for r in reqs[:2]) == [0, 1] and reqs[2].row is None
    engine.cancel(reqs[0])
    assert reqs[0].finish_reason == "cancelled" and 0 in engine.cache.free_rows
    while engine.has_work:
        engine.step()
    assert len(reqs[1].bases()) == 60 and len(reqs[2].bases()) == 60
    assert len(reqs[0].bases()) < 60


@pytest.mark.parametrize("chunk_tokens", [None, 1, 40])
def test_prefill_in_chunks_gives_the_same_outputs(
    tiny_folder: Path, chunk_tokens: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = Carbon.from_pretrained(tiny_folder, max_batch_size=8)
    whole.engine.runner.prefill_chunk_tokens = None  # one forward per prefill step (the GPU default)
    chunked = Carbon.from_pretrained(tiny_folder, max_batch_size=8)
    chunked.engine.runner.prefill_chunk_tokens = chunk_tokens
    forwards: list[int] = []
    original = chunked.engine.runner._prefill_forward

    def counting(requests: list, full: bool, held: list[int] | None = None) -> object:
        forwards.append(len(requests))
        return original(requests, full, held)

    monkeypatch.setattr(chunked.engine.runner, "_prefill_forward", counting)
    prompts = [p for p in PROMPTS if p != "<dna>"] * 2
    for kwargs in ({"temperature": 0}, {"seed": 3}):
        expected = [g.sequence for g in whole.generate(prompts, max_bp=30, **kwargs)]
        assert [g.sequence for g in chunked.generate(prompts, max_bp=30, **kwargs)] == expected
    if chunk_tokens == 1:
        assert set(forwards) == {1}  # a prompt longer than the budget still runs, alone
    elif chunk_tokens == 40:
        assert max(forwards) > 1 and min(forwards) < max(forwards)


def test_prefill_chunk_default_is_cpu_only(tiny_folder: Path) -> None:
    from hexamer.engine.runner import PREFILL_CHUNK_TOKENS_CPU

    carbon = Carbon.from_pretrained(tiny_folder)
    assert carbon.engine.runner.prefill_chunk_tokens == PREFILL_CHUNK_TOKENS_CPU


def test_the_serving_door(tiny_folder: Path) -> None:
    """What a server uses: reserve once, make checked requests, add, step (which hands over what it
    advanced and finished), the counts, cancel_running; refusals are typed and carry the numbers."""
    carbon = Carbon.from_pretrained(tiny_folder)
    engine = Engine(carbon.model, carbon.layout, EngineConfig(max_batch_size=2, max_model_len=64))
    assert engine.rows == 0 and engine.reserve() == 2 and engine.rows == 2 and engine.n_free_rows == 2
    assert engine.kv_bytes > 0 and not engine.has_draft and engine.draft_model is None
    p = carbon.parse_prompt("ACGTACGTAC", 0)
    with pytest.raises(ContextExceeded) as exc:  # refused before its per-base table is allocated
        engine.make_request(p.ids, SamplingParams(max_bp=10**6), forced=p.forced)
    assert (exc.value.prompt_tokens, exc.value.limit, exc.value.limit_name) == (
        len(p.ids),
        64,
        "max_model_len",
    )
    assert exc.value.new_tokens == -(-(len(p.forced) + 10**6) // 6)
    with pytest.raises(SpeculationRefused, match="draft model"):
        req = engine.make_request(p.ids, SamplingParams(max_bp=6), forced=p.forced)
        req.speculative = SpecConfig()
        engine.add(req)
    reqs = [engine.make_request(p.ids, SamplingParams(max_bp=12, seed=i), forced=p.forced) for i in range(3)]
    for r in reqs:
        engine.add(r)
    assert (engine.n_waiting, engine.n_running, engine.has_work) == (3, 0, True)
    first = engine.step()
    assert first.kind == "prefill" and first.advanced == tuple(reqs[:2]) and first.finished == ()
    assert (engine.n_waiting, engine.n_running, engine.n_free_rows) == (1, 2, 0)
    assert engine.cancel_running() == reqs[:2] and engine.n_free_rows == 2
    assert all(r.finish_reason == "cancelled" for r in reqs[:2])
    finished: list[Request] = []
    while engine.has_work:
        finished += engine.step().finished
    assert finished == [reqs[2]] and len(reqs[2].bases()) == 12
    assert engine.step().kind == "idle"
