"""Admission by KV blocks: more sequences than the pool holds all finish, in order of arrival, with
the outputs of a pool that holds them all (preempted ones are computed again), and every block
comes back (finished, cancelled)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hexamer import Carbon
from hexamer.engine import Engine, EngineConfig, SamplingParams
from hexamer.engine.kv_manager import kv_bytes_per_token
from hexamer.model.kv_blocks import BLOCK_SIZE

# bases per request: 1 to 4 blocks of 16 tokens each (a 3-token prompt, bp / 6 + 1 new tokens)
LENGTHS = [60, 300, 12, 120, 330, 6, 200, 90, 30, 250, 150, 66]


def _engine(carbon: Carbon, blocks: int | None) -> Engine:
    per_block = kv_bytes_per_token(carbon.model) * BLOCK_SIZE
    budget = None if blocks is None else blocks * per_block
    engine = Engine(
        carbon.model, carbon.layout, EngineConfig(max_batch_size=8, max_model_len=96, kv_cache_bytes=budget)
    )
    engine.reserve()
    return engine


def _requests(carbon: Carbon, engine: Engine) -> list:
    return [
        engine.make_request(carbon.parse_prompt("ACGTAC", i).ids, SamplingParams(max_bp=bp, seed=i))
        for i, bp in enumerate(LENGTHS)
    ]


def test_more_sequences_than_the_pool_holds_finish_in_order_and_give_every_block_back(
    tiny_folder: Path,
) -> None:
    carbon = Carbon.from_pretrained(tiny_folder)
    engine = _engine(carbon, blocks=6)  # one 96-token row needs 6 blocks: at most 6 short requests
    assert engine.kv_blocks_total == 6 and engine.rows == 8
    reqs = _requests(carbon, engine)
    for r in reqs:
        engine.add(r)
    admitted = []
    while engine.has_work:
        out = engine.step()
        if out.kind == "prefill":
            admitted += out.advanced
        assert engine.kv_blocks_total - engine.kv_blocks_free <= engine.kv_blocks_reserved <= 6
    first = list(dict.fromkeys(id(r) for r in admitted))  # a preempted request is admitted again
    assert first == [id(r) for r in reqs]  # first come, first served
    assert engine.n_preemptions == sum(r.preemptions for r in reqs) > 0
    assert len(admitted) == len(reqs) + engine.n_preemptions
    assert [len(r.bases()) for r in reqs] == LENGTHS
    assert engine.kv_blocks_free == 6 and engine.kv_blocks_reserved == 0  # the pool is full again

    roomy = _engine(carbon, blocks=None)
    alone = _requests(carbon, roomy)
    roomy.run(alone)
    assert [r.bases() for r in reqs] == [r.bases() for r in alone]


def test_cancel_gives_the_blocks_back(tiny_folder: Path) -> None:
    carbon = Carbon.from_pretrained(tiny_folder)
    engine = _engine(carbon, blocks=8)
    reqs = _requests(carbon, engine)[:3]
    for r in reqs:
        engine.add(r)
    engine.step()  # prefill of all three
    assert engine.kv_blocks_reserved == 1 + 4 + 1 and engine.kv_blocks_free == 8 - 3  # one block each so far
    engine.cancel(reqs[1])
    assert engine.kv_blocks_reserved == 2 and engine.kv_blocks_free == 8 - 2
    engine.cancel_running()
    assert engine.kv_blocks_reserved == 0 and engine.kv_blocks_free == 8 and not engine.has_work


def test_each_request_fills_one_run_of_blocks(tiny_folder: Path) -> None:
    """Rows decoded together take their blocks in turn, yet each row's blocks stay consecutive (its
    reservation is one run), so the attention kernel reads every row as one stream."""
    carbon = Carbon.from_pretrained(tiny_folder)
    engine = _engine(carbon, blocks=None)
    reqs = _requests(carbon, engine)[:8]
    for r in reqs:
        engine.add(r)
    cache = engine.cache.cache
    assert cache is not None
    steps = 0
    while engine.has_work:
        engine.step()
        steps += 1
        for blocks in cache.row_blocks:
            assert blocks == list(range(blocks[0], blocks[0] + len(blocks))) if blocks else True
    assert steps > 10 and engine.kv_blocks_free == engine.kv_blocks_total


def _mixed(carbon: Carbon, engine: Engine) -> list:
    """Greedy and seeded DNA requests of both modes, and text requests with log-probabilities."""
    reqs = []
    for i, bp in enumerate([300, 240, 330, 180, 270, 210]):
        mode = "bp" if i % 2 else "token"
        temperature = 0.0 if i % 3 == 0 else 1.0
        params = SamplingParams(mode=mode, max_bp=bp, seed=i, temperature=temperature)
        reqs.append(engine.make_request(carbon.parse_prompt("ACGTACGGA", i).ids, params))
    ids = list(carbon.tokenizer.encode("hello <dna>ACGTAC"))
    for j in range(2):
        params = SamplingParams(
            mode="text", max_new_tokens=40, seed=j, temperature=0.0 if j else 1.0, logprobs=2,
            prompt_logprobs=2, ignore_eos=True,
        )  # fmt: skip
        reqs.append(engine.make_request(ids, params))
    return reqs


def _outputs(reqs: list) -> list:
    """What each request gave, but the log-probabilities of generated tokens (:func:`_logprobs`)."""
    out = []
    for r in reqs:
        if r.is_text:
            assert r.prompt_logprobs is not None
            out.append((r.output_ids, r.prompt_logprobs.logprob.tolist(), r.finish_reason))
        else:
            out.append((r.bases(), r.finish_reason))
    return out


def _logprobs(reqs: list) -> np.ndarray:
    return np.concatenate([x.logprob for r in reqs if r.is_text for x in r.logprobs])


def test_preempted_requests_give_the_outputs_of_a_pool_that_holds_them_all(tiny_folder: Path) -> None:
    """Rows that grow into a pool too small for all of them: the newest give their blocks back and
    are computed again later, in order of arrival; greedy, seeded sampling, both DNA modes and text
    with log-probabilities come out as with room for everyone, and the pool is full again."""
    carbon = Carbon.from_pretrained(tiny_folder)
    engine = _engine(carbon, blocks=8)
    reqs = _mixed(carbon, engine)
    for r in reqs:
        engine.add(r)
    while engine.has_work:
        engine.step()
        assert engine.n_running + engine.n_waiting + sum(r.finish_reason is not None for r in reqs) == len(
            reqs
        )
    assert engine.n_preemptions > 0 and engine.kv_blocks_free == 8 and engine.kv_blocks_reserved == 0

    roomy = _engine(carbon, blocks=None)
    alone = _mixed(carbon, roomy)
    roomy.run(alone)
    assert roomy.n_preemptions == 0
    assert _outputs(reqs) == _outputs(alone)
    # a row computed again by one prefill differs from one decoded token by token in the last
    # float32 bits (as a row decoded in another batch does)
    np.testing.assert_allclose(_logprobs(reqs), _logprobs(alone), rtol=0, atol=1e-5)


def test_a_preempted_request_can_be_cancelled_while_it_waits(tiny_folder: Path) -> None:
    carbon = Carbon.from_pretrained(tiny_folder)
    engine = _engine(carbon, blocks=8)
    reqs = _mixed(carbon, engine)
    for r in reqs:
        engine.add(r)
    while not engine.n_preemptions:
        engine.step()
    victim = next(r for r in reqs if r.preemptions and r.row is None)
    engine.cancel(victim)
    assert victim.finish_reason == "cancelled"
    while engine.has_work:
        engine.step()
    assert engine.kv_blocks_free == 8 and engine.kv_blocks_reserved == 0
