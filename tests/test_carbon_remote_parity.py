"""One front end, two backends: the same ``Carbon`` calls on a model loaded here and on the same
folder served by a live ``hexamer serve`` give the same results (or the same refusal)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from hexamer import Carbon
from hexamer.backend import UnsupportedOperation
from hexamer.remote import TopNWarning
from hexamer.server.testing import serve_in_thread
from hexamer.synthetic import build_carbon_folder
from hexamer.tracks import strided_score
from hexamer.tracks.windows import window_capacity

CONTEXT = 60  # short, so a few hundred bases already need strided windows
SEQS = ["ACGTACGGTTACGATCGATCGGGCTAAATCG", "TTTTGGGGCCCCAAAATTGCAN", "GATTACAGATTACAGATTACA"]
ATOL = 1e-4  # as the other tests of served models: float32 log-probabilities through JSON


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_carbon_folder(tmp_path_factory.mktemp("parity") / "model", max_position_embeddings=CONTEXT)


@pytest.fixture(scope="module")
def local(folder: Path) -> Carbon:
    return Carbon.from_pretrained(folder)


@pytest.fixture(scope="module")
def served(folder: Path) -> Iterator[Carbon]:
    with (
        serve_in_thread(folder, max_logprobs=4608) as url,
        Carbon.from_server(url, top_n=4608) as carbon,
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("error", TopNWarning)  # the whole block is asked for: nothing missing
        yield carbon


def test_both_are_the_one_front_end(local: Carbon, served: Carbon) -> None:
    assert type(local) is type(served) is Carbon
    assert (local.backend.kind, served.backend.kind) == ("local", "remote")
    assert served.context_length == local.context_length == CONTEXT
    assert served.max_prompt_tokens == CONTEXT - 1  # one token less: the completion token


@pytest.mark.parametrize("mode", ["bp", "token"])
def test_greedy_generation_gives_the_same_tokens(local: Carbon, served: Carbon, mode: str) -> None:
    prompts = ["ACGTACGGTTAC", "TTTTGGGGCCCCAAA"]
    options = {"max_bp": 30, "mode": mode, "temperature": 0.0, "seed": 7, "n": 2, "logprobs": mode == "bp"}
    got, want = served.generate(prompts, **options), local.generate(prompts, **options)
    assert [g.token_ids for g in got] == [w.token_ids for w in want]
    assert [g.sequence for g in got] == [w.sequence for w in want]
    if mode == "bp":
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g.logprobs, w.logprobs, atol=ATOL)


@pytest.mark.parametrize("level,method", [("bp", "fns"), ("bp", "exact"), ("token", "fns")])
def test_scores_agree(local: Carbon, served: Carbon, level: str, method: str) -> None:
    """``token_budget`` bounds the work at once on both (one forward here, the requests in flight
    there): a budget below one sequence's tokens changes nothing but the pace."""
    for budget in (16384, 8):
        progress: list[int] = []
        got = served.score(SEQS, level=level, method=method, token_budget=budget, on_progress=progress.append)
        want = local.score(SEQS, level=level, method=method, token_budget=budget)
        assert sum(progress) == len(SEQS)
        for g, w in zip(got, want, strict=True):
            assert g.mean == pytest.approx(w.mean, abs=ATOL)
            assert (g.n_scored, g.n_oov_bases) == (w.n_scored, w.n_oov_bases)
            a, b = (g.per_base, w.per_base) if level == "bp" else (g.per_token, w.per_token)
            np.testing.assert_allclose(a, b, atol=ATOL)


@pytest.mark.parametrize("method", ["fns", "exact"])
def test_base_logprobs_agree(local: Carbon, served: Carbon, method: str) -> None:
    np.testing.assert_allclose(
        served.base_logprobs(SEQS[1], method=method), local.base_logprobs(SEQS[1], method=method), atol=ATOL
    )


def test_stride_reads_long_sequences_on_both(local: Carbon, served: Carbon) -> None:
    """A sequence longer than the context: refused without ``stride`` on both, read by windows with
    it; the served model's windows hold one token less, and give the local model's values for
    those same windows (``base_logprobs(stride=)`` takes the same windows: tests/tracks)."""
    rng = np.random.default_rng(3)
    seq = "".join(rng.choice(list("ACGT"), 360))  # 60 tokens: two windows of 58
    for carbon in (local, served):
        with pytest.raises(ValueError, match="context"):
            carbon.score(seq)
    window = window_capacity(served) * local.layout.k
    got = served.score(seq, stride=120)
    want = strided_score(local, seq, stride=120, window=window)
    assert got.mean == pytest.approx(want.mean, abs=ATOL)
    np.testing.assert_allclose(got.per_base, want.per_base, atol=ATOL)


def test_what_a_backend_cannot_do_is_refused_by_name(local: Carbon, served: Carbon) -> None:
    assert local.embed(SEQS[0]).shape == (local.backend.hidden_size,)  # type: ignore[attr-defined]
    with pytest.raises(UnsupportedOperation, match="hidden states"):
        served.embed(SEQS[0])
    with pytest.raises(UnsupportedOperation, match="takes no draft"):
        served.generate("ACGTAC", max_bp=6, draft=local)
    with pytest.raises(UnsupportedOperation, match="served model's own sampler"):
        local.generate("ACGTAC", max_bp=6, sampler="server")
    for carbon in (local, served):  # the same bad input, the same message
        with pytest.raises(ValueError, match=r"^prompt 0 ends with a partial 6-mer"):
            carbon.check_prompt("ACGTX", max_bp=6)
