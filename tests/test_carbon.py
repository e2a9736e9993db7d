"""Carbon API: generation and scoring against transformers and brute-force references."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from hexamer import Carbon, UnscoredSequenceWarning
from hexamer.bench.common import kmer_only_processor
from hexamer.fns import log_base_marginals, to_acgt

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def carbon(tiny_folder: Path) -> Carbon:
    return Carbon.from_pretrained(tiny_folder, max_batch_size=4)


@pytest.fixture(scope="module")
def hf_model(tiny_folder: Path):
    return transformers.LlamaForCausalLM.from_pretrained(tiny_folder, dtype=torch.float32).eval()


def test_token_greedy_matches_transformers_generate(carbon: Carbon, hf_model) -> None:
    prompts = ["ACGTACGGATTA", "<mammalian_species><dna>TTGACATTGACAGGCATC", "CCCCCC" * 5]
    gens = carbon.generate(prompts, max_new_tokens=12, mode="token", temperature=0)
    layout = carbon.layout
    for prompt, gen in zip(prompts, gens, strict=True):
        text = prompt if "<dna>" in prompt else f"<dna>{prompt}"
        ids = torch.tensor([carbon.tokenizer.encode(text)])
        ref = hf_model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=12,
            do_sample=False,
            logits_processor=[kmer_only_processor(layout.kmer_start, layout.kmer_stop)],
            pad_token_id=carbon.tokenizer.pad_token_id,
        )[0, ids.shape[1] :].tolist()
        assert gen.token_ids == ref
        assert gen.sequence == carbon.tokenizer.decode_dna(ref)


def test_bp_greedy_matches_full_recompute_reference(carbon: Carbon, hf_model) -> None:
    """bp greedy with the KV cache equals argmax of each HF marginal, recomputing the whole prefix."""
    layout = carbon.layout
    prompt = "GATTACAGATTACA"  # 14 bp: the last 2 bases are forced into the first new token
    gen = carbon.generate(prompt, max_bp=40, temperature=0)
    ids = carbon.tokenizer.encode("<dna>GATTACAGATTA")
    forced = "CA"
    bases = ""
    for step in range(-(-(40 + 2) // 6)):
        logits = hf_model(torch.tensor([ids])).logits[0, -1, layout.kmer_start : layout.kmer_stop]
        logm = log_base_marginals(logits)  # (6, 4) ATCG
        if step == 0:
            for j, b in enumerate(forced):
                keep = torch.full((4,), -torch.inf)
                keep["ATCG".index(b)] = 0
                logm[j] = logm[j] + keep
        kmer = "".join("ATCG"[int(i)] for i in logm.argmax(-1))
        bases += kmer
        ids.append(layout.kmer_id(kmer))
    assert bases.startswith(forced)
    assert gen.sequence == bases[2:42]


def test_continuous_batching_equals_single_runs(tiny_folder: Path) -> None:
    small = Carbon.from_pretrained(tiny_folder, max_batch_size=2)
    prompts = ["ACGTAC", "TTGACATTGACATTGACA", "GGGCCCAAATTT" * 3, "A", "<dna>", "CATCATCATCATCAT"]
    lengths = [5, 30, 12, 7, 19, 1]
    together = [
        small.generate(p, max_bp=n, seed=10 + i, temperature=0.9, top_p=0.9).sequence
        for i, (p, n) in enumerate(zip(prompts, lengths, strict=True))
    ]
    # all at once through 2 cache rows: requests join and leave between decode steps
    batch = []
    for i, (p, n) in enumerate(zip(prompts, lengths, strict=True)):
        batch.append(small.generate([p], max_bp=n, seed=[10 + i], temperature=0.9, top_p=0.9)[0].sequence)
    assert batch == together
    mixed = small.engine
    from hexamer.engine import Request, SamplingParams

    reqs = []
    for i, (p, n) in enumerate(zip(prompts, lengths, strict=True)):
        pp = small.parse_prompt(p, i)
        reqs.append(
            Request(
                pp.ids, SamplingParams(max_bp=n, seed=10 + i, temperature=0.9, top_p=0.9), forced=pp.forced
            )
        )
    mixed.run(reqs)
    assert [r.bases() for r in reqs] == together
    assert all(len(s) == n for s, n in zip(together, lengths, strict=True))


def test_seed_reproducible_and_batch_independent(carbon: Carbon) -> None:
    a = carbon.generate(["ACGTACGT", "TTTTTTAAA", "GCGCGC"], max_bp=25, seed=[1, 2, 3])
    b = carbon.generate(["TTTTTTAAA"], max_bp=25, seed=[2])
    c = carbon.generate(["ACGTACGT", "TTTTTTAAA", "GCGCGC"], max_bp=25, seed=[1, 2, 3])
    assert a[1].sequence == b[0].sequence
    assert [g.sequence for g in a] == [g.sequence for g in c]
    d = carbon.generate(["ACGTACGT", "TTTTTTAAA"], max_bp=25, seed=5)
    assert d[1].sequence == carbon.generate("TTTTTTAAA", max_bp=25, seed=6).sequence
    assert (
        carbon.generate("ACGTACGT", max_bp=25, seed=1).sequence
        != carbon.generate("ACGTACGT", max_bp=25, seed=9).sequence
    )


@pytest.mark.parametrize("n", [1, 5, 6, 7, 12, 13, 100])
def test_exact_base_counts(carbon: Carbon, n: int) -> None:
    for prompt in ("ACGTAC", "ACGTACGT"):
        for mode in ("bp", "token"):
            gen = carbon.generate(prompt, max_bp=n, mode=mode, seed=0)
            assert len(gen.sequence) == n and set(gen.sequence) <= set("ACGT")


def test_forced_tail_continues_the_prompt(carbon: Carbon) -> None:
    gen = carbon.generate("ACGTACGTA", max_bp=10, seed=4, mode="token")
    first = carbon.layout.kmer_of(gen.token_ids[0])
    assert first.startswith("GTA")
    assert gen.sequence[:3] == first[3:]
    assert gen.n_prompt_tokens == 2  # <dna> + ACGTAC


def test_masks_are_respected(carbon: Carbon) -> None:
    mask = "NNNATGNNNRYNNNNNBBBBBB"
    for mode in ("bp", "token"):
        for seed in range(5):
            seq = carbon.generate(
                "ACGTACG", max_bp=30, mask=mask, mode=mode, seed=seed, temperature=1.5
            ).sequence
            assert seq[3:6] == "ATG"
            assert seq[9] in "AG" and seq[10] in "CT"
            assert "A" not in seq[16:22]
    acgt = np.ones((4, 4), dtype=bool)
    acgt[:, 0] = False  # forbid A
    seq = carbon.generate("ACGTAC", max_bp=4, mask=acgt, seed=1).sequence
    assert "A" not in seq


def test_dna_only_logits_do_not_change_outputs(tiny_folder: Path, carbon: Carbon) -> None:
    full = Carbon.from_pretrained(tiny_folder, max_batch_size=4, dna_only_logits=False)
    for kwargs in ({"temperature": 0}, {"seed": 3}, {"seed": 4, "mode": "token", "top_p": 0.8}):
        a = carbon.generate(["ACGTACGATC", "TTTGGG"], max_bp=40, **kwargs)
        b = full.generate(["ACGTACGATC", "TTTGGG"], max_bp=40, **kwargs)
        assert [g.sequence for g in a] == [g.sequence for g in b]


def test_stop_at_end_tag(carbon: Carbon) -> None:
    layout = carbon.layout
    with torch.no_grad():
        carbon.model.head_weight[layout.end_id] += 50 * carbon.model.norm.weight  # make </dna> very likely
    try:
        gen = carbon.generate("ACGTAC", max_new_tokens=5, mode="token", stop_at_end_tag=True, seed=0)
        assert gen.finish_reason == "end_tag" and gen.token_ids[-1] == layout.end_id
        assert len(gen.sequence) == 6 * (len(gen.token_ids) - 1)
        assert carbon.generate("ACGTAC", max_new_tokens=5, mode="token", seed=0).finish_reason == "length"
    finally:
        with torch.no_grad():
            carbon.model.head_weight[layout.end_id] -= 50 * carbon.model.norm.weight


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"prompts": ""}, "prompt 0 is empty"),
        ({"prompts": "ACGT" * 4000}, "exceeds the model's context"),
        ({"prompts": "<dna>ACGT</dna>"}, "must end inside an open <dna>"),
        ({"prompts": "ACGTACGN"}, "partial 6-mer 'GN'"),
        ({"prompts": "ACGT", "top_p": 0}, "top_p"),
        ({"prompts": "ACGT", "temperature": -1}, "temperature"),
        ({"prompts": "ACGT", "max_bp": None}, "exactly one of max_bp"),
        ({"prompts": "ACGT", "mask": "NNX"}, "not an IUPAC"),
        ({"prompts": "ACGT", "mask": "N" * 11}, "mask covers 11 bases"),
        ({"prompts": "ACGT", "mode": "codon"}, "mode must be"),
        ({"prompts": [], "max_bp": 5}, "no prompts"),
        ({"prompts": ["A", "C"], "seed": [1]}, "2 prompts"),
    ],
)
def test_bad_generation_input(carbon: Carbon, kwargs: dict, message: str) -> None:
    kwargs = {"max_bp": 10, **kwargs}
    with pytest.raises(ValueError, match=message):
        carbon.generate(**kwargs)


def test_impossible_mask_and_unknown_option(carbon: Carbon) -> None:
    mask = np.zeros((2, 4), dtype=bool)
    with pytest.raises(ValueError, match="impossible mask: position 1"):
        carbon.generate("ACGT", max_bp=5, mask=mask)
    with pytest.raises(ValueError, match="impossible mask: position 1"):
        carbon.generate("ACGTACG", max_bp=5, mask=np.zeros((1, 4), dtype=bool))
    with pytest.raises(TypeError, match="unexpected keyword argument 'beam_width'"):
        carbon.generate("ACGT", max_bp=5, beam_width=4)  # type: ignore[call-arg]


def test_oov_prompt_bases_are_reported(carbon: Carbon) -> None:
    gen = carbon.generate("ACGTNNACGTAC", max_bp=6, seed=0)
    assert gen.n_prompt_oov_bases == 6
    res = carbon.score("ACGTACNNNNNNACG")
    assert res.n_oov_bases == 6 and res.n_scored == 9
    assert np.isnan(res.per_base[6:12]).all() and not np.isnan(res.per_base[:6]).any()


def _hf_kmer_logits(hf_model, carbon: Carbon, text: str) -> torch.Tensor:
    ids = torch.tensor([carbon.tokenizer.encode(text)])
    with torch.no_grad():
        return hf_model(ids).logits[0, :, carbon.layout.kmer_start : carbon.layout.kmer_stop]


def test_bp_score_matches_brute_force_on_transformers_logits(carbon: Carbon, hf_model) -> None:
    seq = "ACGTTGCAGGTACCATGA"  # 3 full 6-mers
    res = carbon.score(seq)
    logits = _hf_kmer_logits(hf_model, carbon, f"<dna>{seq}")
    expected = []
    for t in range(3):
        p = torch.softmax(logits[t].double(), -1)
        for j in range(6):
            b = seq[6 * t + j]
            mass = sum(float(p[i]) for i, kmer in enumerate(carbon.layout.kmers) if kmer[j] == b)
            expected.append(np.log(mass))
    np.testing.assert_allclose(res.per_base, expected, atol=1e-4)
    assert res.mean == pytest.approx(np.mean(expected), abs=1e-4)


def test_exact_and_token_scores(carbon: Carbon, hf_model) -> None:
    seq = "ACGTTGCAGGTACCATGAGC"  # 3 full 6-mers + a 2-base tail
    exact = carbon.score(seq, method="exact")
    token = carbon.score(seq, level="token")
    logits = _hf_kmer_logits(hf_model, carbon, f"<dna>{seq}")
    logp = torch.log_softmax(logits.double(), -1)
    ids = carbon.tokenizer.encode_dna(seq, tags=False) - carbon.layout.kmer_start
    per_token = [float(logp[t, ids[t]]) for t in range(3)]
    np.testing.assert_allclose(token.per_token[:3], per_token, atol=1e-4)
    assert np.isnan(token.per_token[3]) and token.n_scored == 3
    # the exact chain rule sums to the token log-probability over each full 6-mer
    sums = exact.per_base[:18].reshape(3, 6).sum(1)
    np.testing.assert_allclose(sums, per_token, atol=1e-4)
    assert exact.n_scored == 20


def test_batched_scores_equal_single(carbon: Carbon) -> None:
    seqs = ["ACGTACGTAC", "T" * 61, "GATTACA" * 9, "CC"]
    batch = carbon.score(seqs, token_budget=64)
    for s, r in zip(seqs, batch, strict=True):
        single = carbon.score(s)
        np.testing.assert_allclose(r.per_base, single.per_base, atol=1e-5)
    with_tag = carbon.score("ACGTAC", prefix="<mammalian_species>")
    assert with_tag.mean != carbon.score("ACGTAC").mean


def test_base_logprobs(carbon: Carbon, hf_model) -> None:
    seq = "ACGTTGCAGGTACCATG"
    lp = carbon.base_logprobs(seq)
    assert lp.shape == (17, 4)
    np.testing.assert_allclose(np.exp(lp).sum(1), 1.0, atol=1e-5)
    logits = _hf_kmer_logits(hf_model, carbon, f"<dna>{seq}")[:3]
    ref = to_acgt(log_base_marginals(logits)).reshape(-1, 4)[:17]
    np.testing.assert_allclose(lp, ref.numpy(), atol=1e-4)
    per_base = carbon.score(seq).per_base
    np.testing.assert_allclose(lp[np.arange(17), ["ACGT".index(b) for b in seq]], per_base, atol=1e-5)
    exact = carbon.base_logprobs(seq, method="exact")
    np.testing.assert_allclose(exact[0::6], lp[0::6], atol=1e-5)  # first base of a token: no in-token prefix
    with pytest.raises(ValueError, match="method"):
        carbon.base_logprobs(seq, method="nope")  # type: ignore[arg-type]


def test_bad_score_input(carbon: Carbon) -> None:
    with pytest.raises(ValueError, match="sequence 1 is empty"):
        carbon.score(["ACGT", "  "])
    with pytest.raises(ValueError, match="more than the model's context"):
        carbon.score("A" * 6 * 3000)
    with pytest.raises(ValueError, match="level"):
        carbon.score("ACGT", level="codon")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- options users expect


def test_logprobs_equal_the_scores_of_the_generated_bases(carbon: Carbon) -> None:
    prompt = "ACGTACGTTGCA"  # whole 6-mers: the new bases are scored with the same context
    gen = carbon.generate(prompt, max_bp=18, mode="bp", seed=3, logprobs=True)
    per_base = carbon.score(prompt + gen.sequence, level="bp").per_base[len(prompt) :]
    np.testing.assert_allclose(gen.logprobs, per_base, atol=1e-5)
    tok = carbon.generate(prompt, max_bp=18, mode="token", seed=3, logprobs=True)
    per_token = carbon.score(prompt + tok.sequence, level="token").per_token[2:]
    np.testing.assert_allclose(tok.logprobs, per_token, atol=1e-5)
    assert carbon.generate(prompt, max_bp=6, seed=3).logprobs is None


def test_n_samples_use_one_seed_each(carbon: Carbon) -> None:
    many = carbon.generate(["ACGTAC", "GGGTTTACG"], max_bp=12, n=3, seed=10)
    assert len(many) == 6
    for i, prompt in enumerate(["ACGTAC", "GGGTTTACG"]):
        for j in range(3):
            one = carbon.generate(prompt, max_bp=12, seed=10 + 3 * i + j)
            assert many[3 * i + j].sequence == one.sequence and many[3 * i + j].prompt == prompt
    same = carbon.generate("ACGTAC", max_bp=12, num_return_sequences=2, seed=[7])
    assert [g.sequence for g in same] == [
        carbon.generate("ACGTAC", max_bp=12, seed=s).sequence for s in (7, 8)
    ]
    with pytest.raises(ValueError, match="disagree"):
        carbon.generate("ACGTAC", max_bp=6, n=2, num_return_sequences=3)


def test_stop_cuts_before_the_first_stop_string(carbon: Carbon) -> None:
    full = carbon.generate("ACGTAC", max_bp=90, seed=4, logprobs=True)
    cut = carbon.generate("ACGTAC", max_bp=90, seed=4, stop=["AA", "CCC"], logprobs=True)
    first = min(i for i in (full.sequence.find("AA"), full.sequence.find("CCC")) if i >= 0)
    assert cut.sequence == full.sequence[:first] and cut.finish_reason == "stop"
    np.testing.assert_array_equal(cut.logprobs, full.logprobs[:first])
    with pytest.raises(ValueError, match="stop"):
        carbon.generate("ACGTAC", max_bp=6, stop="ANN")


def test_filters_and_penalty_in_token_mode(carbon: Carbon) -> None:
    greedy = carbon.generate("ACGTAC", max_bp=30, mode="token", temperature=0)
    assert carbon.generate("ACGTAC", max_bp=30, mode="token", temperature=0, top_k=3, min_p=0.2).sequence == (
        greedy.sequence
    )
    penalised = carbon.generate("ACGTAC", max_bp=60, mode="token", temperature=0, repetition_penalty=50.0)
    kmers = [penalised.sequence[i : i + 6] for i in range(0, 60, 6)]
    assert len(set(kmers)) == len(kmers) and "ACGTAC" not in kmers  # no 6-mer repeats itself
    with pytest.raises(ValueError, match="mode='token'"):
        carbon.generate("ACGTAC", max_bp=6, top_k=5)
    with pytest.raises(ValueError, match="/v1/completions"):
        carbon.generate("ACGTAC", max_new_tokens=2, mode="text")  # type: ignore[arg-type]


def test_score_sum_repr_and_embed(carbon: Carbon, tiny_folder: Path) -> None:
    from hexamer.embed import embed_sequences

    res = carbon.score("ACGTACGTTGCANNNNNNACGT")
    assert res.sum == pytest.approx(float(np.nansum(res.per_base.astype(np.float64))))
    assert res.sum == pytest.approx(res.mean * res.n_scored, rel=1e-6)
    text = repr(carbon)
    assert text.startswith("Carbon(model='model'") and "dtype=float32" in text and "device=cpu" in text
    assert "context=2,048 tokens" in text and f"{carbon.n_parameters / 1e3:.1f}K" in text
    seqs = ["ACGTACGTTGCA", "TTTTGGGGCCCCAAAA"]
    got = carbon.embed(seqs, pool="mean")
    want = np.stack([v for _, v in embed_sequences(carbon, seqs, pool="mean")])
    np.testing.assert_array_equal(got, want)
    assert carbon.embed(seqs[0]).shape == (carbon.model.config.hidden_size,)
    with pytest.raises(ValueError, match="sequence 1"):
        carbon.embed(["ACGTAC", ""])


def test_a_sequence_with_no_scorable_base_is_marked_not_a_bare_nan(carbon: Carbon) -> None:
    with pytest.warns(UnscoredSequenceWarning, match="1 of 2 sequences"):
        none, some = carbon.score(["NNNNNNNNNNNN", "ACGTACNNNNNN"])
    assert none.status == "unscored" and none.n_scored == 0 and np.isnan(none.mean)
    assert "<oov>" in (none.reason or "") and none.n_oov_bases == 12
    assert some.status == "ok" and some.reason is None and np.isfinite(some.mean)
    with pytest.warns(UnscoredSequenceWarning):
        assert carbon.score("ACG", level="token").status == "unscored"  # no whole 6-mer


@pytest.mark.parametrize("bad", ["ACGT-ACGT", "ACGTXACGT", "ACGT ACGT", "ACGT1"])
def test_score_refuses_what_the_sequence_readers_refuse(carbon: Carbon, bad: str, tmp_path) -> None:
    """One rule for the Python API, a positional sequence and a FASTA record: IUPAC codes only."""
    from hexamer.io import BadRecord, read_sequences

    with pytest.raises(ValueError, match="invalid character"):
        carbon.score(bad)
    with pytest.raises(ValueError, match="invalid character"):
        carbon.check_sequence(bad)
    fasta = tmp_path / "x.fa"
    fasta.write_text(f">x\n{bad}\n")
    if " " not in bad:  # FASTA lines lose their whitespace
        (rec,) = read_sequences(fasta)
        assert isinstance(rec, BadRecord) and "invalid character" in rec.reason
    # IUPAC ambiguity codes are accepted (their 6-mers are <oov>), as the readers accept them
    assert carbon.score("ACGTRYACGTAC").n_oov_bases == 6


def test_generation_lengths_are_checked_against_context_and_kv_memory_first(
    tiny_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    from hexamer.engine import EngineConfig, kv_manager

    carbon = Carbon.from_pretrained(tiny_folder, engine=EngineConfig(kv_cache_bytes=2**16))
    start = time.perf_counter()
    with pytest.raises(
        ValueError,
        match=r"max_bp=1,000,000,000 needs 166,666,667 new tokens, which exceeds the model.s context of 2,048",
    ):
        carbon.generate("ACGTAC", max_bp=10**9)
    with pytest.raises(ValueError, match=r"max_new_tokens=2,049 needs"):
        carbon.check_prompt("ACGTAC", max_new_tokens=2049)
    # the tiny model's cache holds 512 bytes a token: 2,000 tokens are 1000 KiB, over a 64 KiB budget
    with pytest.raises(
        ValueError,
        match=r"max_new_tokens=2,000: the KV-cache budget of 64.0 KiB cannot hold one sequence of 2,000 tokens",
    ):
        carbon.generate("ACGTAC", max_new_tokens=2000)
    assert time.perf_counter() - start < 1
    free = Carbon.from_pretrained(tiny_folder)
    monkeypatch.setattr(kv_manager, "available_memory_bytes", lambda device: 2**16)
    with pytest.raises(ValueError, match=r"max_bp=12,000: one sequence of 2,000 tokens .* free on cpu"):
        free.generate("ACGTAC", max_bp=12_000)
    assert free.generate("ACGTAC", max_bp=12, seed=0).n_bp == 12


def test_non_finite_outputs_are_failed_results(overflow_folder: Path, tiny_folder: Path) -> None:
    from hexamer.backend.results import FailedResultWarning
    from hexamer.model.finite import NonFiniteOutputError

    bad = Carbon.from_pretrained(overflow_folder)  # finite weights: the load check passes
    with pytest.warns(FailedResultWarning, match="2 of 2 results failed"):
        results = bad.score(["ACGTACGTAGCT", "GGATCCAAGCTT"], level="token")
    assert all(r.status == "failed" and np.isnan(r.mean) and np.isnan(r.sum) for r in results)
    with pytest.raises(NonFiniteOutputError):
        bad.base_logprobs("ACGTACGTAGCT")
    with pytest.raises(NonFiniteOutputError, match="sequence 0: non-finite embedding"):
        bad.embed("ACGTACGTAGCT")
    with pytest.warns(FailedResultWarning):
        gens = bad.generate(["ACGTAC", "TTGACA"], max_bp=12, seed=0)
    assert [(g.status, g.finish_reason, g.sequence) for g in gens] == [("failed", "error", "")] * 2
    assert "non-finite logits" in (gens[0].reason or "")


def test_a_failed_generation_leaves_the_others_generated(carbon: Carbon) -> None:
    """One request's NaN logits fail it alone: the batch's other requests are what they are alone."""
    alone = carbon.generate("TTGACAGG", max_bp=18, seed=3)
    runner = carbon.engine.runner
    prefill = runner.prefill

    def poisoned(requests: list, full: bool) -> torch.Tensor:
        logits = prefill(requests, full).clone()
        logits[0] = float("nan")  # the first prompt's last position
        return logits

    runner.prefill = poisoned  # type: ignore[method-assign]
    try:
        with pytest.warns(UserWarning, match="1 of 2 results failed"):
            failed, other = carbon.generate(["ACGTAC", "TTGACAGG"], max_bp=18, seed=[1, 3])
    finally:
        del runner.prefill
    assert failed.status == "failed" and failed.finish_reason == "error" and failed.sequence == ""
    assert other.status == "ok" and other.sequence == alone.sequence
