"""``--server`` on every command a served model can do: the same output as the local model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hexamer.testing.cli import error_message, run, run_json, usage_error

FASTA = Path(__file__).resolve().parents[1] / "data" / "vep" / "chr20_slice.fa.gz"
SEQS = ["ACGTACGGTACCATGCAAGT", "TTGACCANGTACGTTAGGCATT", "GATTACA"]


def _server(url: str, tiny_folder: Path) -> list[str]:
    return ["--server", url, "--tokenizer", str(tiny_folder), "--top-n", "4608"]


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("level,method", [("bp", "fns"), ("bp", "exact"), ("token", "fns")])
def test_score_on_a_server_equals_local(
    vllm_url: str, tiny_folder: Path, tmp_path: Path, level: str, method: str
) -> None:
    args = ["score", *SEQS, "--level", level, "--method", method, "--per-base"]
    remote, local = tmp_path / "remote.jsonl", tmp_path / "local.jsonl"
    summary = run_json([*args, "--out", str(remote), *_server(vllm_url, tiny_folder)])
    run_json([*args, "--out", str(local), "--model", str(tiny_folder)])
    assert summary["n_records"] == len(SEQS)
    got, want = _rows(remote), _rows(local)
    assert [(r["id"], r["status"], r["n_scored"]) for r in got] == [
        (r["id"], r["status"], r["n_scored"]) for r in want
    ]
    for g, w in zip(got, want, strict=True):
        assert g["mean_logprob"] == pytest.approx(w["mean_logprob"], abs=1e-4)
        assert g["per_base_logprob"] == pytest.approx(w["per_base_logprob"], abs=1e-4, nan_ok=True)


def test_server_with_model_or_ray_is_a_usage_error(vllm_url: str, tiny_folder: Path) -> None:
    bad = usage_error(["score", "ACGT", "--server", vllm_url, "--model", str(tiny_folder)])
    assert "not both" in bad.format_message()
    bad = usage_error(["score", "ACGT", "--server", vllm_url, "--ray", "local"])
    assert "--ray" in bad.format_message()


@pytest.mark.parametrize(
    ("command", "option"),
    [
        (["score", "ACGT"], ["--dtype", "bfloat16"]),
        (["generate", "ACGT", "--max-bp", "6"], ["--device", "cpu"]),
        (["ism", "--fasta", "ref.fa", "-r", "20:1-2", "-o", "x.tsv"], ["--threads", "1"]),
        (["track", "--fasta", "ref.fa", "-o", "tracks"], ["--dtype", "float32"]),
        (["vep", "--vcf", "v.vcf", "--fasta", "ref.fa", "-o", "x.tsv"], ["--threads", "2"]),
        (["calibrate", "--fasta", "ref.fa", "-o", "c.json"], ["--device", "cpu"]),
        (["embed", "-i", "seqs.fa", "-o", "e.parquet"], ["--dtype", "float32"]),
        (["score", "ACGT"], ["--device", "cuda:7"]),  # said before the device is looked at
    ],
)
def test_local_model_options_are_refused_with_a_server(command: list[str], option: list[str]) -> None:
    """--dtype, --device and --threads set up a local model: with --server they would do nothing."""
    bad = usage_error([*command, "--server", "http://127.0.0.1:9", *option])
    assert option[0] in bad.format_message() and "--server" in bad.format_message()


def test_embed_on_a_vllm_server_is_refused_by_name(vllm_url: str, tiny_folder: Path, tmp_path: Path) -> None:
    """vLLM's /v1/embeddings pools its own way: one clean error, nothing written (hexamer serve:
    tests/remote/test_hexamer_server.py)."""
    fasta = tmp_path / "seqs.fa"
    fasta.write_text(">a\nACGTACGTTGCA\n")
    out = tmp_path / "e.parquet"
    result = run(["embed", "-i", str(fasta), "-o", str(out), *_server(vllm_url, tiny_folder)])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit)
    assert "pools its own way" in error_message(result)
    assert not out.exists()
    bad = usage_error(
        ["embed", "-i", str(fasta), "-o", str(out), "--server", vllm_url, "-m", str(tiny_folder)]
    )
    assert "not both" in bad.format_message()


@pytest.mark.parametrize(
    "command",
    [
        ["score", "ACGT"],
        ["generate", "ACGT", "--max-bp", "6"],
        ["ism", "--fasta", str(FASTA), "-r", "20:60301-60301", "--window", "60"],
        ["track", "--fasta", str(FASTA), "-r", "20:60301-60360", "--format", "bedgraph"],
    ],
)
def test_a_bad_served_model_is_a_clean_error(
    vllm_url: str, tiny_folder: Path, tmp_path: Path, command: list[str]
) -> None:
    out = tmp_path / ("t" if command[0] == "track" else "out.jsonl")
    result = run([*command, "-o", str(out), *_server(vllm_url, tiny_folder), "--served-model", "nope"])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit)  # no traceback
    assert "not 'nope'" in error_message(result)
    assert not out.exists()


def test_an_unreachable_server_is_a_clean_error(tiny_folder: Path, tmp_path: Path) -> None:
    """(Connection errors are retried with backoff first: this test takes some seconds.)"""
    out = tmp_path / "out.tsv"
    result = run(["score", "ACGT", "-o", str(out), *_server("http://127.0.0.1:9", tiny_folder)])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit)
    assert "127.0.0.1:9" in error_message(result)
    assert not out.exists()


@pytest.mark.parametrize("mode,extra", [("bp", []), ("token", ["--top-k", "20"]), ("token", [])])
def test_generate_on_a_server_equals_local(
    vllm_url: str, tiny_folder: Path, tmp_path: Path, mode: str, extra: list[str]
) -> None:
    """Seeded sampling: the client sampler (bp mode, or token mode with --top-k) is the local
    engine's, so the same seed gives the same sequences; the server's sampler (plain token mode)
    gives its own, checked for lengths and statuses."""
    prompts = ["ACGTACGGTACC", "TTGACCA", "ACGTXYZ"]  # the last is a bad record
    args = ["generate", *prompts, "--mode", mode, "--max-bp", "18", "--seed", "7", "--n", "2", *extra]
    remote, local = tmp_path / "remote.jsonl", tmp_path / "local.jsonl"
    summary = run_json([*args, "--out", str(remote), *_server(vllm_url, tiny_folder)])
    run_json([*args, "--out", str(local), "--model", str(tiny_folder)])
    assert summary["status_counts"] == {"ok": 2, "skipped": 1}
    got, want = _rows(remote), _rows(local)
    assert [(r["id"], r["sample"], r["status"], r["n_bp"]) for r in got] == [
        (r["id"], r["sample"], r["status"], r["n_bp"]) for r in want
    ]
    if mode == "bp" or extra:
        assert [r["sequence"] for r in got] == [r["sequence"] for r in want]


def test_generate_refuses_what_a_server_cannot_do(vllm_url: str, tiny_folder: Path) -> None:
    base = ["generate", "ACGT", *_server(vllm_url, tiny_folder)]
    bad = usage_error([*base, "--repetition-penalty", "1.3"])
    assert "--repetition-penalty" in bad.format_message()
    bad = usage_error([*base, "--draft", str(tiny_folder)])
    assert "--draft" in bad.format_message()
    assert "not both" in usage_error([*base, "--model", str(tiny_folder)]).format_message()


def test_generate_sampler_client_is_the_local_engine_in_token_mode(
    vllm_url: str, tiny_folder: Path, tmp_path: Path
) -> None:
    """Plain token mode would take the server's sampler; --sampler client draws here, so a seed gives
    the local model's sequences."""
    args = ["generate", "ACGTACGGTACC", "TTGACC", "--mode", "token", "--max-bp", "18", "--seed", "3"]
    remote, local = tmp_path / "remote.jsonl", tmp_path / "local.jsonl"
    run_json([*args, "--sampler", "client", "--out", str(remote), *_server(vllm_url, tiny_folder)])
    run_json([*args, "--out", str(local), "--model", str(tiny_folder)])
    assert [r["sequence"] for r in _rows(remote)] == [r["sequence"] for r in _rows(local)]


def test_generate_sampler_server_refuses_what_it_cannot_take(
    vllm_url: str, tiny_folder: Path, tmp_path: Path
) -> None:
    served = [*_server(vllm_url, tiny_folder), "--sampler", "server"]
    assert "mode='token'" in usage_error(["generate", "ACGTAC", "--mode", "bp", *served]).format_message()
    bad = usage_error(["generate", "ACGTAC", "--mode", "token", "--logprobs", "-o", "x.tsv", *served])
    assert "logprobs" in bad.format_message()
    local = usage_error(["generate", "ACGTAC", "--model", str(tiny_folder), "--sampler", "client"])
    assert "--server" in local.format_message()
    # a prompt that does not end on a 6-mer boundary is a failed record; the others are generated
    out = tmp_path / "gen.jsonl"
    summary = run_json(
        ["generate", "ACGTAC", "TTGACCA", "--mode", "token", "--max-bp", "12", "-o", str(out), *served]
    )
    assert summary["status_counts"] == {"ok": 1, "failed": 1}
    rows = {r["id"]: r for r in _rows(out)}
    assert rows["seq2"]["status"] == "failed" and "6-mer boundary" in rows["seq2"]["error"]
    assert rows["seq1"]["n_bp"] == 12


@pytest.mark.parametrize(
    "recipe", [["--window", "120", "--window-grid", "6"], ["--recipe", "next_base", "--context", "60"]]
)
def test_ism_on_a_server_equals_local(
    vllm_url: str, tiny_folder: Path, tmp_path: Path, recipe: list[str]
) -> None:
    """The remote backend has no KV sharing: ISM scores each window on its own, to the same rows."""
    args = ["ism", "--fasta", str(FASTA), "-r", "20:60301-60304", *recipe]
    remote, local = tmp_path / "remote.jsonl", tmp_path / "local.jsonl"
    summary = run_json([*args, "-o", str(remote), *_server(vllm_url, tiny_folder)])
    run_json([*args, "-o", str(local), "--model", str(tiny_folder)])
    got, want = _rows(remote), _rows(local)
    assert summary["n_rows"] == len(want) == 12 and summary["status_counts"] == {"ok": 12}
    keys = [k for k in want[0] if k not in ("score", "phred", "raw")]
    assert [[r[k] for k in keys] for r in got] == [[r[k] for k in keys] for r in want]
    for g, w in zip(got, want, strict=True):
        assert g["score"] == pytest.approx(w["score"], abs=1e-4)


def test_track_on_a_server_equals_local(vllm_url: str, tiny_folder: Path, tmp_path: Path) -> None:
    """Tracks come from ``base_logprobs``, which a served model gives too: the same values."""
    from tests.tracks.conftest import OOV_FA
    from tests.tracks.helpers import bedgraph_values

    args = ["track", "--fasta", str(OOV_FA), "-r", "t:1101-1400", "--format", "bedgraph"]
    args += ["--kinds", "logprob,entropy,llr", "--window", "120", "--stride", "60"]
    remote, local = tmp_path / "remote", tmp_path / "local"
    summary = run_json([*args, "-o", str(remote), *_server(vllm_url, tiny_folder)])
    want = run_json([*args, "-o", str(local), "--model", str(tiny_folder)])
    assert (summary["bases_scored"], summary["bases_absent"]) == (want["bases_scored"], want["bases_absent"])
    assert summary["bases_scored"] > 0
    for name in ("logprob_A", "logprob_ref", "entropy", "llr"):
        got = bedgraph_values(remote / f"{name}.bedGraph", "t", 1100, 1400)
        np.testing.assert_allclose(
            got, bedgraph_values(local / f"{name}.bedGraph", "t", 1100, 1400), atol=1e-4
        )


def test_track_refuses_a_server_with_a_model(vllm_url: str, tiny_folder: Path, tmp_path: Path) -> None:
    from tests.tracks.conftest import OOV_FA

    args = ["track", "--fasta", str(OOV_FA), "-o", str(tmp_path / "t"), "--server", vllm_url]
    assert "not both" in usage_error([*args, "--model", str(tiny_folder)]).format_message()


@pytest.mark.parametrize(
    "command,ok",
    [
        (["score", "ACGT", "GATTACA"], True),
        (["score", "XXXX"], False),  # nothing scored: exit 1, the connection closed all the same
        (["generate", "ACGT", "--max-bp", "6"], True),
        (["ism", "--fasta", str(FASTA), "-r", "20:60301-60301", "--window", "60"], True),
        (["track", "--fasta", str(FASTA), "-r", "20:60301-60360", "--format", "bedgraph"], True),
    ],
)
def test_the_connection_is_closed_when_the_command_ends(
    vllm_url: str, tiny_folder: Path, tmp_path: Path, monkeypatch, command: list[str], ok: bool
) -> None:
    from hexamer import Carbon

    closed: list[Carbon] = []
    close = Carbon.close

    def counting_close(self: Carbon) -> None:
        closed.append(self)
        close(self)

    monkeypatch.setattr(Carbon, "close", counting_close)
    out = tmp_path / ("t" if command[0] == "track" else "out.jsonl")
    result = run([*command, "-o", str(out), *_server(vllm_url, tiny_folder)])
    assert result.exit_code == (0 if ok else 1), result.output
    assert len(closed) >= 1 and len(set(map(id, closed))) == 1


def test_calibrate_on_a_server_equals_local_and_is_tied_to_the_server(
    vllm_url: str, tiny_folder: Path, tmp_path: Path
) -> None:
    """The same background scores as the local model; the table carries the server's fingerprint,
    so it calibrates the served model and a local run refuses it."""
    args = ["calibrate", "--fasta", str(FASTA), "--window", "120", "--regions", "2", "--region-bp", "3"]
    remote, local = tmp_path / "remote.json", tmp_path / "local.json"
    made = run_json([*args, "-o", str(remote), *_server(vllm_url, tiny_folder)])
    run_json([*args, "-o", str(local), "--model", str(tiny_folder)])
    got, want = json.loads(remote.read_text()), json.loads(local.read_text())
    assert made["n_scores"] == want["n_scores"] > 0
    assert got["settings"] == want["settings"] and got["model"] != want["model"]
    assert got["thresholds"] == pytest.approx(want["thresholds"], abs=1e-4)
    assert got["phreds"] == want["phreds"]
    ism = ["ism", "--fasta", str(FASTA), "-r", "20:60301-60302", "--window", "120", "--calibration"]
    rows = tmp_path / "rows.jsonl"
    run_json([*ism, str(remote), "-o", str(rows), *_server(vllm_url, tiny_folder)])
    assert all(r["phred"] is not None for r in _rows(rows) if r["status"] == "ok")
    refused = run([*ism, str(remote), "-o", str(tmp_path / "x.jsonl"), "--model", str(tiny_folder)])
    assert refused.exit_code != 0 and "model" in error_message(refused)
