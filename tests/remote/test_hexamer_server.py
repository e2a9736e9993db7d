"""Carbon.from_server against hexamer's own server (the real uvicorn app): equal to the local Carbon."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from hexamer import Carbon
from hexamer.remote import TopNWarning
from hexamer.server.testing import serve_in_thread

SEQS = ["ACGTACGGTTACGATCGATCGGGCTAAATCG", "TTTTGGGGCCCCAAAATTGCAN"]


@pytest.fixture(scope="module")
def hexamer_url(tiny_folder: Path) -> Iterator[str]:
    with serve_in_thread(tiny_folder, max_logprobs=4608, api_key="key") as url:
        yield url


@pytest.fixture(scope="module")
def remote(hexamer_url: str, tiny_folder: Path) -> Iterator[Carbon]:
    with Carbon.from_server(hexamer_url, api_key="key", top_n=4608) as m:  # tokenizer: the served folder
        yield m


def test_detected_as_hexamer(remote: Carbon, tiny_folder: Path) -> None:
    assert remote.backend.server_kind == "hexamer"
    assert remote.context_length == 2048


@pytest.mark.parametrize("level,method", [("bp", "fns"), ("bp", "exact"), ("token", "fns")])
def test_scores_equal_local(remote: Carbon, local: Carbon, level: str, method: str) -> None:
    seqs = SEQS
    with warnings.catch_warnings():
        warnings.simplefilter("error", TopNWarning)
        got = remote.score(seqs, level=level, method=method)
    for g, w in zip(got, local.score(seqs, level=level, method=method), strict=True):
        assert g.mean == pytest.approx(w.mean, abs=1e-4)
        a, b = (g.per_base, w.per_base) if level == "bp" else (g.per_token, w.per_token)
        np.testing.assert_allclose(a, b, atol=1e-4)


def test_base_logprobs_equal_local(remote: Carbon, local: Carbon) -> None:
    for method in ("fns", "exact"):
        np.testing.assert_allclose(
            remote.base_logprobs(SEQS[1], method=method),
            local.base_logprobs(SEQS[1], method=method),
            atol=1e-4,
        )


def test_generation_equals_local(remote: Carbon, local: Carbon) -> None:
    prompts = ["ACGTACGGTTAC", "TTTTGGGGCCCCAAA"]
    opts = {"max_bp": 17, "seed": 3, "mask": "NNRY", "temperature": 0.8}
    assert [g.sequence for g in remote.generate(prompts, **opts)] == [
        g.sequence for g in local.generate(prompts, **opts)
    ]
    token = {"max_bp": 20, "mode": "token", "temperature": 1.0, "seed": 5}
    got = remote.generate(["ACGTAC", "GGGGGGTTTTTT"], sampler="server", **token)
    assert [g.sequence for g in got] == [
        g.sequence for g in local.generate(["ACGTAC", "GGGGGGTTTTTT"], **token)
    ]


def test_vep_next_base_equals_local(remote: Carbon, local: Carbon) -> None:
    from hexamer.vep import score_variants

    data = Path(__file__).resolve().parents[1] / "data" / "vep"
    options = {"recipe": "next_base", "context": 120, "context_grid": 60}
    got = list(score_variants(remote, data / "chr20_slice.vcf", data / "chr20_slice.fa.gz", **options))
    want = list(score_variants(local, data / "chr20_slice.vcf", data / "chr20_slice.fa.gz", **options))
    assert [r["status"] for r in got] == [r["status"] for r in want]
    for g, w in zip(got, want, strict=True):
        assert (g["score"] is None) == (w["score"] is None)
        if w["score"] is not None:
            assert g["score"] == pytest.approx(w["score"], abs=1e-4)


def test_bench_serve_against_it(hexamer_url: str) -> None:
    from hexamer.bench.serve import run_serve_bench

    report = run_serve_bench(
        url=hexamer_url, api_key="key", num_prompts=4, input_len=13, output_len=6, max_concurrency=2
    )
    rows = {r["key"]: r for r in report.rows}
    assert rows["completed"]["value"] == 4 and rows["total_output_tokens"]["value"] == 24
    assert rows["itl"]["mean"] > 0 and "on hexamer" in report.title


def test_embed_command_on_it_equals_local(hexamer_url: str, tiny_folder: Path, tmp_path: Path) -> None:
    """``hexamer embed --server``: the server pools with the library's code; a record without a
    vector keeps its row and reason, as with a local model."""
    import pyarrow.parquet as pq

    from hexamer.testing.cli import run_json

    fasta = tmp_path / "seqs.fa"
    fasta.write_text(">a\nACGTACGTTGCA\n>empty\n\n>b\n" + "GATTACA" * 100 + "\n")
    args = ["embed", "-i", str(fasta), "--pool", "last", "--layer", "1", "--max-tokens", "40", "--json"]
    remote, local = tmp_path / "remote.parquet", tmp_path / "local.parquet"
    summary = run_json([*args, "-o", str(remote), "--server", hexamer_url, "--api-key", "key"])
    run_json([*args, "-o", str(local), "-m", str(tiny_folder)])
    assert summary == {"output": str(remote), "n_records": 3, "n_without_vector": 1}
    got, want = pq.read_table(remote).to_pylist(), pq.read_table(local).to_pylist()
    assert [(r["id"], r["error"]) for r in got] == [(r["id"], r["error"]) for r in want]
    for g, w in zip(got, want, strict=True):
        if w["embedding"] is not None:
            np.testing.assert_allclose(g["embedding"], w["embedding"], atol=1e-5)
