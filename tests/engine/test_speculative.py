"""Speculative decoding: greedy parity with the target alone, exact sampling distribution, KV rollback."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import chisquare
from typer.testing import CliRunner

from hexamer import Carbon
from hexamer.bench.spec import PairShape, build_spec_pair
from hexamer.engine import Request, SamplingParams
from hexamer.engine.speculative import (
    AdaptiveK,
    SpecBatch,
    SpecConfig,
    SpeculativeDecoder,
    accept_draft,
    best_k,
    check_compatible,
    product_distribution,
    residual_distribution,
)
from hexamer.fns import bp_sampling_probs, kmer_mask_from_positions, sample_from_probs, token_sampling_probs
from hexamer.testing import build_carbon_folder
from hexamer.tokenizer import DnaLayout

TINY_PAIR = PairShape(64, 128, 4, 2, draft_layers=1, extra_layers=2, sharpness=6.0)
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


def _spec_first_token(p: torch.Tensor, q: torch.Tensor, n: int, gen: torch.Generator) -> torch.Tensor:
    """Vectorised one-step speculative sampling: draft from q, accept/reject, resample."""
    v = p.shape[0]
    d = sample_from_probs(q.expand(n, v), torch.rand(n, dtype=torch.float64, generator=gen))
    a = accept_draft(p[d][:, None], q[d][:, None], torch.rand(n, 1, dtype=torch.float64, generator=gen))
    res = residual_distribution(p, q)
    r = sample_from_probs(res.expand(n, v), torch.rand(n, dtype=torch.float64, generator=gen))
    return torch.where(a == 1, d, r)


@pytest.mark.parametrize(
    ("p", "q"),
    [
        ([0.5, 0.2, 0.2, 0.1, 0.0], [0.1, 0.1, 0.3, 0.2, 0.3]),
        ([0.0, 0.0, 1.0, 0.0, 0.0], [0.25, 0.25, 0.0, 0.25, 0.25]),  # draft never proposes the answer
        ([0.3, 0.3, 0.4, 0.0, 0.0], [0.3, 0.3, 0.4, 0.0, 0.0]),  # identical: always accepted
        ([0.05, 0.05, 0.05, 0.05, 0.8], [0.8, 0.05, 0.05, 0.05, 0.05]),
    ],
)
def test_accept_resample_gives_p(p: list[float], q: list[float]) -> None:
    pt, qt = torch.tensor(p, dtype=torch.float64), torch.tensor(q, dtype=torch.float64)
    # analytically: P(out = x) = q(x) min(1, p(x)/q(x)) + (1 - sum_y min(p, q)) * residual(x)
    accepted = torch.minimum(pt, qt)
    exact = accepted + (1 - accepted.sum()) * residual_distribution(pt, qt)
    torch.testing.assert_close(exact, pt)
    # empirically, through the same functions the decoder uses
    n = 200_000
    out = _spec_first_token(pt, qt, n, torch.Generator().manual_seed(0))
    freq = torch.bincount(out, minlength=len(p)).double() / n
    assert float((freq - pt).abs().sum()) / 2 < 0.006  # TV distance; sampling noise is ~0.002
    assert float(freq[pt == 0].sum()) == 0.0


def test_product_distribution_is_independent_bases() -> None:
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 4**6, generator=gen) * 3
    per_base = bp_sampling_probs(logits, temperature=0.8, top_p=0.9)
    joint = product_distribution(per_base)
    torch.testing.assert_close(joint.sum(-1), torch.ones(3, dtype=torch.float64))
    # bp sampling with one uniform per base lands on k-mer x with probability prod_j P_j(x_j)
    kmer = torch.tensor([0, 1234, 4095])
    digits = torch.stack([(kmer // 4 ** (5 - j)) % 4 for j in range(6)], -1)
    expect = per_base[torch.arange(3)[:, None], torch.arange(6), digits].prod(-1)
    torch.testing.assert_close(joint[torch.arange(3), kmer], expect)


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


# --------------------------------------------------------------------------- KV rollback


def test_rollback_leaves_no_trace(pair: tuple[Carbon, Carbon]) -> None:
    """After rejections, each cache equals a fresh forward over the committed tokens, even with the
    rolled-back slots overwritten by garbage."""
    target, draft = pair
    prompts = ["ACGTACGTACGG", "TTGACATTGACATTGACA", "<dna>"]
    reqs = [
        Request(target.parse_prompt(p, i).ids, SamplingParams(max_bp=90, temperature=1.0, seed=i))
        for i, p in enumerate(prompts)
    ]
    batch = SpecBatch(target.model, draft.model, target.layout, reqs, SpecConfig(k=4, adaptive=False), 0.5)
    rejected_rows = set()
    for _ in range(6):
        before = [r.n_generated for r in reqs]
        batch.step()
        rejected_rows |= {i for i, r in enumerate(reqs) if r.n_generated - before[i] < 5}
        if rejected_rows and all(r.n_generated > 0 for r in reqs):
            break
    assert rejected_rows, "no rejection happened; the test would prove nothing"
    kmer0 = target.layout.kmer_start
    for model, cache, pending in (
        (target.model, batch.tcache, [r.t_pending for r in batch.rows]),
        (draft.model, batch.dcache, [r.d_pending for r in batch.rows]),
    ):
        for i, r in enumerate(reqs):
            committed = [*r.prompt_ids, *(kmer0 + t for t in r.output_kmers)]
            length = int(cache.lengths[i])
            assert length == len(committed) - len(pending[i])
            assert committed[length:] == pending[i]
            assert bool(cache.valid[i, :length].all()) and not bool(cache.valid[i, length:].any())
            for layer in range(len(cache.k)):  # garbage where rejected drafts were
                cache.k[layer][i, :, length:] = 1e3
                cache.v[layer][i, :, length:] = -1e3
        with torch.inference_mode():
            for i, r in enumerate(reqs):
                committed = [*r.prompt_ids, *(kmer0 + t for t in r.output_kmers)]
                step = model(
                    torch.tensor([pending[i]]),
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
    other.layout = dataclasses.replace(draft.layout, dna_start_id=draft.layout.dna_start_id - 1)
    with pytest.raises(ValueError, match="layouts differ"):
        target.generate("ACGTAC", max_bp=6, draft=other)
    with pytest.raises(ValueError, match="stop_at_end_tag"):
        target.generate("ACGTAC", max_bp=6, mode="token", stop_at_end_tag=True, draft=draft)
    assert isinstance(target.layout, DnaLayout)


def test_cli_generate_with_draft(pair: tuple[Carbon, Carbon], tmp_path: Path) -> None:
    from hexamer.cli import app

    target, draft = pair
    out = tmp_path / "gen.tsv"
    args = ["generate", "ACGTACGTAC", "GGCAT", "--max-bp", "20", "--temperature", "0", "-o", str(out)]
    t_dir, d_dir = target.tokenizer.name_or_path, draft.tokenizer.name_or_path
    result = CliRunner().invoke(app, [*args, "--model", t_dir, "--draft", d_dir, "--spec-k", "2", "--json"])
    assert result.exit_code == 0, result.output
    spec = json.loads(result.stdout.strip().splitlines()[-1])["speculative"]
    assert 0 <= spec["acceptance_rate"] <= 1 and spec["tokens_per_forward"] >= 1
    lines = out.read_text().splitlines()
    assert len(lines) == 3
    alone = target.generate(["ACGTACGTAC", "GGCAT"], max_bp=20, temperature=0)
    header = lines[0].split("\t")
    seqs = [line.split("\t")[header.index("sequence")] for line in lines[1:]]
    assert seqs == [g.sequence for g in alone]
    bad = CliRunner().invoke(app, [*args, "--model", t_dir, "--draft", d_dir, "--spec-k", "zero"])
    assert bad.exit_code != 0
