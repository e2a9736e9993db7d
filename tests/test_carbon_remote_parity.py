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


#: float32 vectors pooled by the same code on both: only the batches' shapes differ (measured: at
#: most 5e-7 on the tiny model)
EMBED_ATOL = 1e-5
#: 700 bp = 117 tokens: three chunks of a 60-token context; lower case, U, IUPAC and a non-ASCII
#: character (``<oov>`` 6-mers, sent to the server as N)
EMBED_SEQS = [*SEQS, "".join(np.random.default_rng(5).choice(list("ACGT"), 700)), "acgtuuRYacgtéGGAT"]


@pytest.mark.parametrize("pool", ["mean", "last", "sep"])
@pytest.mark.parametrize("layer", [-1, 1, 0])
def test_embeddings_agree(local: Carbon, served: Carbon, pool: str, layer: int) -> None:
    """The server chunks and pools with the library's code: each pool and layer, a sequence that
    needs chunking; ``batch_size`` (sequences per request there) splits the list into requests."""
    got = served.embed(EMBED_SEQS, pool=pool, layer=layer, batch_size=2)  # type: ignore[arg-type]
    want = local.embed(EMBED_SEQS, pool=pool, layer=layer, batch_size=2)  # type: ignore[arg-type]
    assert got.shape == want.shape == (len(EMBED_SEQS), local.backend.hidden_size)  # type: ignore[attr-defined]
    np.testing.assert_allclose(got, want, atol=EMBED_ATOL)


def test_embedding_chunking_options_agree(local: Carbon, served: Carbon) -> None:
    """``max_tokens``, ``chunk_overlap`` and ``prefix`` travel to the server and cut the same chunks."""
    options = {"max_tokens": 20, "chunk_overlap": 30, "prefix": "<mammalian_species>"}
    got, want = served.embed(EMBED_SEQS[3], **options), local.embed(EMBED_SEQS[3], **options)
    assert got.shape == want.shape == (local.backend.hidden_size,)  # type: ignore[attr-defined]
    np.testing.assert_allclose(got, want, atol=EMBED_ATOL)
    assert np.abs(got - served.embed(EMBED_SEQS[3])).max() > 1e-3  # the options did change the vector


@pytest.mark.parametrize(
    "options,message",
    [
        ({"pool": "max"}, r"^pool must be one of mean, last, sep, got 'max'$"),
        ({"layer": 3}, r"^layer 3 is out of range: the model has 2 layers"),
        ({"layer": -4}, r"^layer -4 is out of range"),
        (
            {"max_tokens": CONTEXT + 1},
            rf"^max_tokens={CONTEXT + 1} exceeds the model's context of {CONTEXT}$",
        ),
        ({"max_tokens": 2}, r"^max_tokens=2 leaves no room for DNA"),
        ({"chunk_overlap": -6}, r"^chunk_overlap must be >= 0 bp, got -6$"),
        ({"chunk_overlap": 600}, r"^chunk_overlap=600 bp is not shorter than a chunk"),
        ({"batch_size": 0}, r"^batch_size and token_budget must be >= 1$"),
        ({"prefix": "ACGT"}, r"prefix"),
    ],
)
def test_bad_embedding_options_get_the_same_message(
    local: Carbon, served: Carbon, options: dict, message: str
) -> None:
    said = []
    for carbon in (local, served):
        with pytest.raises(ValueError, match=message) as caught:
            carbon.embed(SEQS[0], **options)
        said.append(str(caught.value))
    assert said[0] == said[1]


def test_a_record_without_a_vector_is_refused_alike(local: Carbon, served: Carbon) -> None:
    for carbon in (local, served):
        with pytest.raises(ValueError, match=r"^no sequences given$"):
            carbon.embed([])
        with pytest.raises(ValueError, match=r"^sequence 1: empty sequence$"):
            carbon.embed([SEQS[0], " \n"])


def test_a_non_hexamer_server_is_refused_not_trusted(served: Carbon) -> None:
    """A vLLM server's /v1/embeddings pools its own way: the same call is refused, naming why."""
    refusal = r"is a vllm server, whose /v1/embeddings pools its own way"
    url = served.backend.url  # type: ignore[attr-defined]
    with (
        Carbon.from_server(url, backend="vllm") as as_vllm,
        pytest.raises(UnsupportedOperation, match=refusal),
    ):
        as_vllm.embed(SEQS[0])


def test_what_a_backend_cannot_do_is_refused_by_name(local: Carbon, served: Carbon) -> None:
    with pytest.raises(UnsupportedOperation, match="takes no draft"):
        served.generate("ACGTAC", max_bp=6, draft=local)
    with pytest.raises(UnsupportedOperation, match="served model's own sampler"):
        local.generate("ACGTAC", max_bp=6, sampler="server")
    for carbon in (local, served):  # the same bad input, the same message
        with pytest.raises(ValueError, match=r"^prompt 0 ends with a partial 6-mer"):
            carbon.check_prompt("ACGTX", max_bp=6)
