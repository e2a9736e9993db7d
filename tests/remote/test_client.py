"""Carbon.from_server against fake vLLM / SGLang servers: the numbers must equal the local Carbon's."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from hexamer import Carbon
from hexamer.remote import TopNWarning

SEQS = ["ACGTACGGTTACGATCGATCGGGCTAAATCG", "TTTTGGGGCCCCAAAATTGCAN", "GATTACAGATTACAGATTACA"]


def remote(url: str, folder: Path, **options) -> Carbon:
    return Carbon.from_server(url, tokenizer=folder, top_n=4608, **options)


@pytest.fixture(scope="module", params=["vllm", "sglang"])
def both(request, vllm_url: str, sglang_url: str, tiny_folder: Path):
    url = vllm_url if request.param == "vllm" else sglang_url
    with remote(url, tiny_folder) as m:
        yield m


def test_backend_detected(both: Carbon) -> None:
    assert both.backend.server_kind in ("vllm", "sglang")
    assert both.backend.served_model == "tiny-carbon"
    assert both.context_length == 2048  # from the tokenizer folder's config.json


@pytest.mark.parametrize("level,method", [("bp", "fns"), ("bp", "exact"), ("token", "fns")])
def test_scores_equal_local(both: Carbon, local: Carbon, level: str, method: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", TopNWarning)
        got = both.score(SEQS, level=level, method=method, prefix="<x>" if level == "token" else "")
    want = local.score(SEQS, level=level, method=method, prefix="<x>" if level == "token" else "")
    for g, w in zip(got, want, strict=True):
        assert g.mean == pytest.approx(w.mean, abs=1e-4)
        assert (g.n_scored, g.n_oov_bases) == (w.n_scored, w.n_oov_bases)
        a, b = (g.per_base, w.per_base) if level == "bp" else (g.per_token, w.per_token)
        np.testing.assert_allclose(a, b, atol=1e-4)
        assert np.array_equal(np.isnan(a), np.isnan(b))


@pytest.mark.parametrize("method", ["fns", "exact"])
def test_base_logprobs_equal_local(both: Carbon, local: Carbon, method: str) -> None:
    got = both.base_logprobs(SEQS[0], method=method)
    want = local.base_logprobs(SEQS[0], method=method)
    assert got.shape == (len(SEQS[0]), 4)
    np.testing.assert_allclose(got, want, atol=1e-4)


@pytest.mark.parametrize("mode", ["bp", "token"])
def test_client_side_generation_equals_local(both: Carbon, local: Carbon, mode: str) -> None:
    prompts = ["ACGTACGGTTAC", "<x><dna>TTTTGGGGCCCCAAA"]  # the second ends mid-6-mer: forced tail
    opts = {"max_bp": 17, "mode": mode, "temperature": 0.9, "top_p": 0.95, "seed": 7, "mask": "NNRY"}
    got = both.generate(prompts, sampler="client", **opts)
    want = local.generate(prompts, **opts)
    for g, w in zip(got, want, strict=True):
        assert g.sequence == w.sequence
        assert len(g.sequence) == 17
        assert g.token_ids == w.token_ids
        assert g.finish_reason == w.finish_reason == "length"


def test_greedy_bp_generation_equals_local(both: Carbon, local: Carbon) -> None:
    got = both.generate("GATTACAGATTACA", max_new_tokens=3, temperature=0)
    assert got.sequence == local.generate("GATTACAGATTACA", max_new_tokens=3, temperature=0).sequence


def test_server_side_token_generation(vllm_url: str, tiny_folder: Path, local: Carbon) -> None:
    with remote(vllm_url, tiny_folder) as m:
        progress: list[int] = []
        got = m.generate(
            ["ACGTAC", "GGGGGGTTTTTT"], max_bp=20, mode="token", temperature=0, on_progress=progress.append
        )
        want = local.generate(["ACGTAC", "GGGGGGTTTTTT"], max_bp=20, mode="token", temperature=0)
        assert [g.sequence for g in got] == [w.sequence for w in want]
        assert sorted(progress) == [20, 20]
        with pytest.raises(ValueError, match="sampler='server' needs mode='token'"):
            m.generate("ACGTAC", max_bp=6, mode="bp", sampler="server")


def test_bad_input_raises_like_local(both: Carbon, local: Carbon) -> None:
    for call in (
        lambda c: c.score(""),
        lambda c: c.generate("ACGTN", max_bp=3),
        lambda c: c.score("A", level="x"),
    ):
        with pytest.raises(ValueError) as remote_err:
            call(both)
        with pytest.raises(ValueError) as local_err:
            call(local)
        assert str(remote_err.value) == str(local_err.value)


def test_generation_lengths_past_the_served_context_are_refused_before_any_request(
    both: Carbon,
) -> None:
    with pytest.raises(ValueError, match=r"^max_bp=1,000,000,000,000 needs .* the served context of"):
        both.generate("ACGTAC", max_bp=10**12)
    most = 6 * both.context_length  # fits alone, not after the prompt: refused before its table
    with pytest.raises(ValueError, match=r"^prompt 0: .* exceeds the served context of"):
        both.check_prompt("ACGTACGT", max_bp=most)


def test_sampling_extras_n_stop_and_logprobs_equal_local(both: Carbon, local: Carbon) -> None:
    """top_k, min_p and logprobs run in the client sampler, n and stop as locally: the same seeds
    give the local Carbon's samples, cuts and log-probabilities."""
    opts = {
        "max_bp": 24,
        "mode": "token",
        "top_k": 5,
        "min_p": 0.05,
        "n": 2,
        "seed": 3,
        "stop": ["ta", "GGG"],
        "logprobs": True,
    }
    prompts = ["ACGTACGGTTAC", "GATTACAGATTAC"]
    got = both.generate(prompts, **opts)
    want = local.generate(prompts, **opts)
    assert len(got) == len(want) == 4  # prompt by prompt, n samples each
    for g, w in zip(got, want, strict=True):
        assert (g.sequence, g.finish_reason, g.token_ids) == (w.sequence, w.finish_reason, w.token_ids)
        np.testing.assert_allclose(g.logprobs, w.logprobs, atol=1e-4)
    bp = both.generate("ACGTACGGTTAC", max_bp=10, n=3, seed=1, logprobs=True)
    assert [g.sequence for g in bp] == [
        w.sequence for w in local.generate("ACGTACGGTTAC", max_bp=10, n=3, seed=1)
    ]
    assert all(len(g.logprobs) == 10 for g in bp)  # bp mode: one per new base


def test_server_sampler_refuses_client_only_options_by_name(vllm_url: str, tiny_folder: Path) -> None:
    with remote(vllm_url, tiny_folder) as m:
        for option, value in (("top_k", 3), ("min_p", 0.1), ("logprobs", True)):
            with pytest.raises(ValueError, match=f"does not take {option}"):
                m.generate("ACGTAC", max_bp=6, mode="token", sampler="server", **{option: value})
        # transformers' repetition penalty needs the raw logits' signs: no server gives them
        with pytest.raises(ValueError, match="takes no repetition_penalty"):
            m.generate("ACGTAC", max_bp=6, mode="token", repetition_penalty=1.2)
        with pytest.raises(ValueError, match="mode='token'"):  # as locally: top_k filters 6-mers
            m.generate("ACGTAC", max_bp=6, top_k=3)
        with pytest.raises(ValueError, match="stop must be non-empty DNA"):
            m.generate("ACGTAC", max_bp=6, stop=["TXA"])
        # n and stop need no client sampler: the server path serves them
        got = m.generate("ACGTAC", max_bp=12, mode="token", temperature=0, n=2, stop="T", sampler="server")
        assert [g.finish_reason for g in got] in (["stop", "stop"], ["length", "length"])
        assert all("T" not in g.sequence for g in got)


def test_a_fifo_config_json_in_the_tokenizer_folder_is_refused_not_read(
    vllm_url: str, tiny_folder: Path, tmp_path: Path
) -> None:
    """The client reads the context length from the tokenizer folder's config.json when the server
    does not say it: with the checks of model loading, so a FIFO there is an error, not a hang."""
    import os
    import shutil

    from hexamer.testing.hangs import error_within

    folder = tmp_path / "tok"
    shutil.copytree(tiny_folder, folder, ignore=shutil.ignore_patterns("config.json", "*.safetensors"))
    os.mkfifo(folder / "config.json")
    error = error_within(
        lambda: remote(vllm_url, folder).close(), what="the client reading a FIFO config.json"
    )
    assert isinstance(error, ValueError) and "config.json is not a regular file" in str(error)
    (folder / "config.json").unlink()
    with remote(vllm_url, folder) as m:  # a tokenizer-only folder: no context length from it
        assert m.context_length > 0


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"top_n": 0}, ValueError),
        ({"model": "not-served"}, ValueError),
        ({"tokenizer": "/absent"}, ValueError),
    ],
)
def test_a_failed_set_up_closes_the_connection(
    vllm_url: str, tiny_folder: Path, monkeypatch: pytest.MonkeyPatch, options: dict, error: type
) -> None:
    """Whatever fails after the connection opens (model, tokenizer, top N), the connection is closed."""
    from hexamer.remote.http import Connection

    closed: list[Connection] = []
    real_close = Connection.close
    monkeypatch.setattr(Connection, "close", lambda self: (closed.append(self), real_close(self))[1])
    with pytest.raises(error):
        Carbon.from_server(vllm_url, **{"tokenizer": str(tiny_folder), **options})
    assert len(closed) == 1


def test_a_server_that_fails_a_sequence_gives_failed_results(overflow_folder: Path) -> None:
    """hexamer's server answers 500 to a NaN/inf model output: each such sequence or prompt is a
    failed result with the server's message, the call itself goes on."""
    from hexamer.backend.results import FailedResultWarning
    from hexamer.server.testing import serve_in_thread

    with (
        serve_in_thread(overflow_folder, max_num_seqs=4, max_model_len=256) as url,
        Carbon.from_server(url, tokenizer=overflow_folder) as m,
    ):
        with pytest.warns(FailedResultWarning, match="2 of 2"):
            scores = m.score(["ACGTACGTAGCT", "TTGACAGG"])
        assert all(s.status == "failed" and "HTTP 500: non-finite logits" in s.reason for s in scores)
        with pytest.warns(FailedResultWarning):
            gens = m.generate(["ACGTAC", "TTGACA"], max_bp=12, seed=0)
        assert all(g.status == "failed" and g.finish_reason == "error" for g in gens)
        assert all("HTTP 500: non-finite logits" in (g.reason or "") for g in gens)
