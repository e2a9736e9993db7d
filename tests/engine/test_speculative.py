"""Speculative decoding: greedy parity with the target alone, exact sampling distribution, KV rollback."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from hexamer import Carbon
from hexamer.bench.spec import TINY_PAIR, build_spec_pair
from hexamer.engine import Request, SamplingParams
from hexamer.engine.draft import DraftRunner
from hexamer.engine.spec_config import AdaptiveK, SpecConfig, best_k
from hexamer.engine.speculative import SpeculativeDecoder, check_compatible
from hexamer.fns import bp_sampling_probs, kmer_mask_from_positions, token_sampling_probs
from hexamer.synthetic import build_carbon_folder
from hexamer.testing.cli import run, run_ok
from hexamer.tokenizer import DnaLayout

PROMPTS = ["ACGTACGTAC", "TTGACATTGACATTGACA", "<dna>", "GGCAT", "<mammalian_species><dna>ACGTTGCAAC"]


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Carbon, Carbon]:
    """(target, draft): the target is the draft plus two noisy near-identity layers (partial agreement)."""
    draft_dir, target_dir = build_spec_pair(tmp_path_factory.mktemp("spec"), TINY_PAIR, noise=0.02)
    return Carbon.from_pretrained(target_dir), Carbon.from_pretrained(draft_dir)


@pytest.fixture(scope="module")
def unrelated(tiny_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Carbon, Carbon]:
    """(target, draft) with independent random weights: the draft is nearly always wrong when greedy."""
    other = build_carbon_folder(tmp_path_factory.mktemp("other") / "m", seed=5, num_hidden_layers=1)
    return Carbon.from_pretrained(tiny_folder), Carbon.from_pretrained(other)


# --------------------------------------------------------------------------- greedy parity


@pytest.mark.parametrize("mode", ["bp", "token"])
@pytest.mark.parametrize("k", [1, 3, "auto"])
def test_greedy_equals_target_alone(pair: tuple[Carbon, Carbon], mode: str, k: int | str) -> None:
    target, draft = pair
    for max_bp, mask in ((37, None), (50, "NNNNATGNNNNNNNNNNNNTAANRYN")):
        opts = {"max_bp": max_bp, "mode": mode, "temperature": 0, "mask": mask}
        alone = target.generate(PROMPTS, **opts)
        spec = target.generate(PROMPTS, draft=draft, num_speculative=k, **opts)
        assert [g.sequence for g in spec] == [g.sequence for g in alone]
        assert [g.token_ids for g in spec] == [g.token_ids for g in alone]
        assert all(g.n_bp == max_bp for g in spec)
        stats = target.last_spec_stats
        assert stats is not None and 0 < stats.acceptance_rate < 1  # both accept and reject happened
        if mask is not None:
            assert all(g.sequence[4:7] == "ATG" and g.sequence[19:22] == "TAA" for g in spec)
        # one prompt alone (batch 1) gives the same as in the batch
        one = target.generate(PROMPTS[1], draft=draft, num_speculative=k, **opts)
        assert one.sequence == alone[1].sequence


def test_greedy_with_a_bad_draft(unrelated: tuple[Carbon, Carbon]) -> None:
    target, draft = unrelated
    for mode in ("bp", "token"):
        alone = target.generate(PROMPTS[:3], max_bp=31, mode=mode, temperature=0)
        spec = target.generate(PROMPTS[:3], max_bp=31, mode=mode, temperature=0, draft=draft)
        assert [g.sequence for g in spec] == [g.sequence for g in alone]


def test_perfect_draft_accepts_everything(pair: tuple[Carbon, Carbon]) -> None:
    target, _ = pair
    out = target.generate("ACGTACGTAC", max_bp=120, temperature=0.7, seed=3, draft=target, num_speculative=4)
    stats = target.last_spec_stats
    assert stats is not None and stats.acceptance_rate == 1.0
    assert stats.tokens_per_forward > 4  # k accepted + bonus per round (fewer at the end)
    assert out.n_bp == 120


def test_speculative_and_plain_requests_share_steps(pair: tuple[Carbon, Carbon]) -> None:
    """One engine, a draft attached: speculative and plain requests advance in the same steps and
    each equals its own run alone (plain: the engine's draws; speculative: the library's)."""
    target, draft = pair
    config = SpecConfig(k=3, adaptive=False)
    plan = [(PROMPTS[0], "bp", 0.9, True), (PROMPTS[1], "token", 0.0, False), (PROMPTS[2], "bp", 0.8, False),
            (PROMPTS[3], "token", 0.7, True), (PROMPTS[4], "bp", 0.0, False), (PROMPTS[1], "bp", 1.0, False)]  # fmt: skip
    engine = Carbon(target.model, target.tokenizer, max_batch_size=len(plan)).engine
    engine.attach_draft(draft.model)
    reqs = []
    for seed, (prompt, mode, temperature, spec) in enumerate(plan):
        p = target.parse_prompt(prompt, seed)
        params = SamplingParams(max_bp=61, mode=mode, temperature=temperature, seed=seed)
        reqs.append(Request(p.ids, params, forced=p.forced, speculative=config if spec else None))
    engine.cache.ensure(max(DraftRunner.slots_needed(r) for r in reqs), len(reqs))
    for r in reqs:
        engine.add(r)
    mixed_steps = 0
    with torch.inference_mode():
        while engine.scheduler.has_work:
            kinds = {r.spec_stats is not None for r in engine.step().advanced}
            mixed_steps += kinds == {True, False}
    assert mixed_steps > 3  # 4 plain rows of 6: the plain decode must leave the draft's rows alone
    for seed, ((prompt, mode, temperature, spec), r) in enumerate(zip(plan, reqs, strict=True)):
        opts = {"max_bp": 61, "mode": mode, "temperature": temperature, "seed": seed}
        alone = target.generate(prompt, **opts, **({"draft": draft, "num_speculative": 3} if spec else {}))
        assert r.bases() == alone.sequence, (seed, spec)


# --------------------------------------------------------------------------- seeds


def test_seeded_and_batch_independent(pair: tuple[Carbon, Carbon]) -> None:
    target, draft = pair
    for mode in ("bp", "token"):
        opts = {"max_bp": 61, "mode": mode, "temperature": 0.9, "top_p": 0.95, "draft": draft}
        a = target.generate(PROMPTS, seed=[1, 2, 3, 4, 5], **opts)
        b = target.generate(PROMPTS, seed=[1, 2, 3, 4, 5], **opts)
        c = target.generate(PROMPTS[2], seed=3, **opts)
        d = target.generate(PROMPTS, seed=[9, 2, 3, 4, 5], **opts)
        assert [g.sequence for g in a] == [g.sequence for g in b]
        assert c.sequence == a[2].sequence
        assert d[0].sequence != a[0].sequence
        assert [g.sequence for g in d[1:]] == [g.sequence for g in a[1:]]


# --------------------------------------------------------------------------- exactness of the maths


def _exact_joint(
    target: Carbon, prompt: str, mode: str, temperature: float, allowed: torch.Tensor
) -> dict[tuple[int, int], float]:
    """Target-only probability of each (token 1, token 2) pair, from cache-free full forwards."""
    p_ = target.parse_prompt(prompt, 0)
    assert p_.forced == ""
    layout = target.layout

    def dist(ids: list[int], a: torch.Tensor) -> torch.Tensor:
        logits = target.backend.kmer_logits([ids])[:, -1]
        if mode == "bp":  # independent bases: P(x) = prod_j P_j(x_j), written out without our helper
            per_base = bp_sampling_probs(logits, temperature=temperature, allowed=a[None])[0]
            kmers = torch.arange(4**6)
            digits = torch.stack([(kmers // 4 ** (5 - j)) % 4 for j in range(6)], -1)
            return per_base[torch.arange(6), digits].prod(-1)
        km = kmer_mask_from_positions(a[None])
        return token_sampling_probs(logits, temperature=temperature, allowed_kmers=km)[0]

    first = dist(p_.ids, allowed[0])
    out = {}
    for t1 in first.nonzero().flatten().tolist():
        second = dist([*p_.ids, layout.kmer_start + t1], allowed[1])
        for t2 in second.nonzero().flatten().tolist():
            out[(t1, t2)] = float(first[t1] * second[t2])
    return out


@pytest.mark.parametrize(
    ("mode", "models", "temperature"),
    [
        ("bp", "pair", 0.7),
        ("token", "unrelated", 0.1),  # mostly rejected: the residual draws carry the law
        pytest.param("token", "pair", 0.7, marks=pytest.mark.slow),
        pytest.param("bp", "unrelated", 0.1, marks=pytest.mark.slow),
    ],
)
def test_sampled_distribution_matches_target(
    mode: str, models: str, temperature: float, request: pytest.FixtureRequest
) -> None:
    """Many seeds in one batch: the empirical law of the first two tokens is the target's (chi-square)."""
    target, draft = request.getfixturevalue(models)
    prompt, mask, n = "ACGTACGTACGT", "NAAAAAANAAAA", 1500
    params = [
        SamplingParams(max_bp=12, mode=mode, temperature=temperature, mask=mask, seed=s) for s in range(n)
    ]
    ids = target.parse_prompt(prompt, 0).ids
    reqs = [Request(ids, p) for p in params]
    decoder = SpeculativeDecoder(target.model, draft.model, target.layout, SpecConfig(k=2, max_batch_size=n))
    stats = decoder.run(reqs)
    assert 0.1 < stats.acceptance_rate < 0.99  # both branches are exercised
    allowed = torch.from_numpy(params[0].mask_atcg).reshape(2, 6, 4)
    exact = _exact_joint(target, prompt, mode, temperature, allowed)
    keys = sorted(exact)
    counts = dict.fromkeys(keys, 0)
    for r in reqs:
        pair_ = (r.output_kmers[0], r.output_kmers[1])
        assert pair_ in counts, f"{pair_} has probability 0 under the target"
        counts[pair_] += 1
    expected = np.array([exact[key] for key in keys]) * n
    observed = np.array([counts[key] for key in keys])
    assert expected.sum() == pytest.approx(n)
    assert chisquare(observed, expected).pvalue > 1e-3


def test_top_k_sampling_law_matches_target(pair: tuple[Carbon, Carbon]) -> None:
    """Token mode with top_k: the first two tokens' law is the target's top-k law (softmax over the
    k most likely 6-mers, computed here with torch.topk), draft filtered by the same rule."""
    target, draft = pair
    prompt, n, top_k, temperature = "ACGTACGTACGT", 1500, 4, 1.0
    target = Carbon(target.model, target.tokenizer, max_batch_size=n)  # one batch
    out = target.generate([prompt] * n, max_bp=12, mode="token", temperature=temperature, top_k=top_k,
                          seed=list(range(n)), draft=draft, num_speculative=2)  # fmt: skip
    stats = target.last_spec_stats
    assert stats is not None and 0.1 < stats.acceptance_rate < 0.99
    ids = target.parse_prompt(prompt, 0).ids

    def law(context: list[int]) -> torch.Tensor:
        logits = target.backend.kmer_logits([context])[0, -1].double()
        kth = torch.topk(logits, top_k).values[-1]
        return torch.softmax(torch.where(logits >= kth, logits, -torch.inf) / temperature, dim=-1)

    first = law(ids)
    exact = {}
    for t1 in first.nonzero().flatten().tolist():
        second = law([*ids, target.layout.kmer_start + t1])
        for t2 in second.nonzero().flatten().tolist():
            exact[(t1, t2)] = float(first[t1] * second[t2])
    keys = sorted(exact)
    counts = dict.fromkeys(keys, 0)
    for g in out:
        key = (g.token_ids[0] - target.layout.kmer_start, g.token_ids[1] - target.layout.kmer_start)
        assert key in counts, f"{key} is outside the target's top-{top_k}"
        counts[key] += 1
    expected = np.array([exact[key] for key in keys]) * n
    assert chisquare(np.array([counts[key] for key in keys]), expected).pvalue > 1e-3


# --------------------------------------------------------------------------- KV rollback


def test_rollback_leaves_no_trace(pair: tuple[Carbon, Carbon]) -> None:
    """After rejections, each cache equals a fresh forward over the committed tokens, even with the
    rolled-back slots overwritten by garbage."""
    target, draft = pair
    prompts = ["ACGTACGTACGG", "TTGACATTGACATTGACA", "<dna>"]
    config = SpecConfig(k=4, adaptive=False)
    reqs = [
        Request(
            target.parse_prompt(p, i).ids,
            SamplingParams(max_bp=300, temperature=1.0, seed=i),
            speculative=config,
        )
        for i, p in enumerate(prompts)
    ]
    engine = Carbon(target.model, target.tokenizer, max_batch_size=len(reqs)).engine
    engine.attach_draft(draft.model)
    engine.cache.ensure(max(DraftRunner.slots_needed(r) for r in reqs), len(reqs))
    for r in reqs:
        engine.add(r)
    engine.step()  # prefill: both caches take the prompts, nothing is sampled
    assert all(r.n_generated == 0 for r in reqs)
    rejected_rows = set()
    for _ in range(6):
        before = [r.n_generated for r in reqs]
        engine.step()
        rejected_rows |= {i for i, r in enumerate(reqs) if r.n_generated - before[i] < 5}
        if rejected_rows and all(r.n_generated > 0 for r in reqs):
            break
    assert rejected_rows, "no rejection happened; the test would prove nothing"
    assert all(r.n_generated < r.n_tokens for r in reqs)  # still running: their state is inspectable
    kmer0 = target.layout.kmer_start
    runner = engine.draft
    assert runner is not None and engine.cache.cache is not None and runner.cache is not None
    rows = [r.row for r in reqs]
    for model, cache, pending in (
        (target.model, engine.cache.cache, [runner.row(r).t_pending for r in reqs]),
        (draft.model, runner.cache, [runner.row(r).d_pending for r in reqs]),
    ):
        for j, r in enumerate(reqs):
            i = rows[j]
            committed = [*r.prompt_ids, *(kmer0 + t for t in r.output_kmers)]
            length = int(cache.lengths[i])
            assert length == len(committed) - len(pending[j])
            assert committed[length:] == pending[j]
            assert bool(cache.valid[i, :length].all()) and not bool(cache.valid[i, length:].any())
            with torch.inference_mode():  # the engine made the caches in inference mode
                bs = cache.block_size  # garbage where rejected drafts were, in the row's last block
                for slot in range(length, len(cache.row_blocks[i]) * bs):
                    block = cache.row_blocks[i][slot // bs]
                    for layer in range(len(cache.k)):
                        cache.k[layer][:, block, slot % bs] = 1e3
                        cache.v[layer][:, block, slot % bs] = -1e3
        with torch.inference_mode():
            for j, r in enumerate(reqs):
                i = rows[j]
                committed = [*r.prompt_ids, *(kmer0 + t for t in r.output_kmers)]
                step = model(
                    torch.tensor([pending[j]]),
                    kv_cache=cache,
                    cache_rows=[i],
                    logits_at="last",
                    vocab_rows=(kmer0, target.layout.kmer_stop),
                ).logits
                fresh = model(
                    torch.tensor([committed]), logits_at="last", vocab_rows=(kmer0, target.layout.kmer_stop)
                ).logits
                torch.testing.assert_close(step, fresh, atol=2e-5, rtol=1e-4)


# --------------------------------------------------------------------------- adaptive k, errors


def test_adaptive_k_follows_acceptance() -> None:
    ctl = AdaptiveK(SpecConfig(k=4, k_max=8), draft_cost=0.1)
    for _ in range(10):
        ctl.update(ctl.k, ctl.k)  # everything accepted
    assert ctl.k == 8
    for _ in range(30):
        ctl.update(ctl.k, 0)  # everything rejected
    assert ctl.k == 1
    fixed = AdaptiveK(SpecConfig.from_option(3), draft_cost=0.1)
    fixed.update(3, 0)
    assert fixed.k == 3
    assert best_k(0.0, 0.1, 8) == 1 and best_k(1.0, 0.0, 8) == 8
    assert best_k(0.9, 0.05, 16) > best_k(0.6, 0.05, 16) > 1
    assert best_k(0.9, 0.05, 16) > best_k(0.9, 0.3, 16)
    with pytest.raises(ValueError, match="num_speculative"):
        SpecConfig.from_option(0)
    with pytest.raises(ValueError, match="num_speculative"):
        SpecConfig.from_option("many")  # type: ignore[arg-type]


def test_incompatible_or_unsupported(pair: tuple[Carbon, Carbon]) -> None:
    target, draft = pair
    check_compatible(target, draft)
    other = Carbon(draft.model, draft.tokenizer)
    other.backend.layout = dataclasses.replace(draft.layout, dna_start_id=draft.layout.dna_start_id - 1)
    with pytest.raises(ValueError, match="layouts differ"):
        target.generate("ACGTAC", max_bp=6, draft=other)
    with pytest.raises(ValueError, match="stop_at_end_tag"):
        target.generate("ACGTAC", max_bp=6, mode="token", stop_at_end_tag=True, draft=draft)
    assert isinstance(target.layout, DnaLayout)


def test_engine_admission(pair: tuple[Carbon, Carbon]) -> None:
    """A speculative request needs a draft; one whose row has no room for a round's drafts is
    decoded without the draft (same output as plain decoding, no spec stats)."""
    target, draft = pair
    prompt = target.parse_prompt("ACGTACGTAC", 0)
    ids = prompt.ids
    params = SamplingParams(max_bp=30, temperature=0.8, seed=4)
    engine = Carbon(target.model, target.tokenizer, max_batch_size=2).engine
    with pytest.raises(ValueError, match="draft model"):
        engine.add(Request(ids, params, speculative=SpecConfig()))
    engine.attach_draft(draft.model)
    with pytest.raises(ValueError, match="mode='text'"):
        engine.check(Request(ids, SamplingParams(mode="text", max_new_tokens=3), speculative=SpecConfig()))
    tight = Request(ids, params, forced=prompt.forced, speculative=SpecConfig(k=4, adaptive=False))
    engine.cache.ensure(tight.total_len, 1)  # no room for the padding of a 4-draft verify
    engine.add(tight)
    with torch.inference_mode():
        while engine.scheduler.has_work:
            engine.step()
    assert tight.spec_stats is None
    assert tight.bases() == target.generate("ACGTACGTAC", max_bp=30, temperature=0.8, seed=4).sequence


def test_cli_generate_with_draft(pair: tuple[Carbon, Carbon], tmp_path: Path) -> None:

    target, draft = pair
    out = tmp_path / "gen.tsv"
    args = ["generate", "ACGTACGTAC", "GGCAT", "--max-bp", "20", "--temperature", "0", "-o", str(out)]
    t_dir, d_dir = target.tokenizer.name_or_path, draft.tokenizer.name_or_path
    result = run_ok([*args, "--model", t_dir, "--draft", d_dir, "--spec-k", "2", "--json"])
    spec = json.loads(result.stdout.strip().splitlines()[-1])["speculative"]
    assert 0 <= spec["acceptance_rate"] <= 1 and spec["tokens_per_forward"] >= 1
    lines = out.read_text().splitlines()
    assert len(lines) == 3
    alone = target.generate(["ACGTACGTAC", "GGCAT"], max_bp=20, temperature=0)
    header = lines[0].split("\t")
    seqs = [line.split("\t")[header.index("sequence")] for line in lines[1:]]
    assert seqs == [g.sequence for g in alone]
    bad = run([*args, "--model", t_dir, "--draft", d_dir, "--spec-k", "zero"])
    assert bad.exit_code != 0


# --------------------------------------------------------------------------- non-finite outputs


@pytest.mark.parametrize("broken", ["draft", "target"])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_non_finite_logits_fail_the_request_not_the_round(
    tiny_folder: Path, overflow_folder: Path, broken: str, temperature: float
) -> None:
    """NaN logits of either model end the request as failed, with the reason; no exception."""
    good, bad = Carbon.from_pretrained(tiny_folder), Carbon.from_pretrained(overflow_folder)
    target, draft = (good, bad) if broken == "draft" else (bad, good)
    with pytest.warns(UserWarning, match="results failed"):
        gens = target.generate(
            ["ACGTACGTAC", "TTGACA"],
            max_bp=30,
            temperature=temperature,
            seed=0,
            draft=draft,
            num_speculative=3,
        )
    what = "draft model logits" if broken == "draft" else "logits"
    assert all(g.status == "failed" and g.finish_reason == "error" for g in gens)
    assert all(f"non-finite {what}:" in (g.reason or "") for g in gens)
