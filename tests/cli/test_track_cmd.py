"""``hexamer track`` through its files and ``--json`` summary."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from hexamer import Carbon
from hexamer.synthetic import build_carbon_folder
from hexamer.testing.cli import error_message, run, run_json, usage_error
from hexamer.tracks import scored_bases, strided_base_logprobs
from tests.tracks.conftest import CONTEXT, OOV_FA
from tests.tracks.helpers import bedgraph_values, bigwig_values


@pytest.fixture(scope="module")
def short_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model with a 40-token context: a 600 bp region already needs windows."""
    return build_carbon_folder(tmp_path_factory.mktemp("short") / "model", max_position_embeddings=CONTEXT)


def test_track_writes_files_hub_and_json(short_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["track", "-m", short_folder, "--fasta", OOV_FA, "-r", "t:1101-1700", "-o", out]
    summary = run_json(
        [
            *args,
            "--kinds",
            "logprob,llr",
            "--format",
            "bigwig,bedgraph",
            "--hub",
            "--genome",
            "hg38",
            "--stride",
            "60",
        ]
    )
    names = [
        "logprob_A",
        "logprob_C",
        "logprob_G",
        "logprob_T",
        "logprob_ref",
        "llr",
        "prob_A",
        "prob_C",
        "prob_G",
        "prob_T",
    ]
    expected = {str(out / f"{n}{s}") for n in names for s in (".bw", ".bedGraph")} | {
        str(out / f) for f in ("hub.txt", "genomes.txt", "trackDb.txt")
    }
    assert set(summary["files"]) == expected and all(Path(f).is_file() for f in expected)
    assert summary["regions"] == ["t:1101-1700"] and summary["bases"] == 600
    assert summary["bases_absent"] == 12 and summary["bases_scored"] == 588
    assert summary["stride_bp"] == 60 and summary["window_bp"] == 234 and summary["bp_per_s"] > 0
    carbon = Carbon.from_pretrained(short_folder)
    import pysam

    with pysam.FastaFile(str(OOV_FA)) as fa:
        seq = fa.fetch("t", 1100, 1700).upper()
    lp = strided_base_logprobs(carbon, seq, stride=60)
    lp[~scored_bases(seq, 6)] = np.nan
    got = bigwig_values(out / "logprob_G.bw", "t", 1100, 1700)
    np.testing.assert_allclose(got, lp[:, 2], rtol=0, atol=1e-6)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(lp[:, 2]))
    np.testing.assert_array_equal(
        bedgraph_values(out / "llr.bedGraph", "t", 1100, 1700), bigwig_values(out / "llr.bw", "t", 1100, 1700)
    )


@pytest.mark.parametrize(
    ("extra", "option"),
    [
        (["--kinds", "logprob,nope"], "--kinds"),
        (["--format", "bigwig,wig"], "--format"),
        (["--hub"], "--genome"),
        (["--hub", "--genome", "hg38", "--format", "bedgraph"], "--format"),
        (["--stride", "0"], "--stride"),
    ],
)
def test_bad_options_are_usage_errors(
    short_folder: Path, tmp_path: Path, extra: list[str], option: str
) -> None:
    args = ["track", "-m", short_folder, "--fasta", OOV_FA, "-o", tmp_path / "o", *extra]
    assert run(args).exit_code == 2
    exc = usage_error(args)
    param = getattr(exc, "param", None)
    names = [*(param.opts if param is not None else []), str(getattr(exc, "param_hint", "") or "")]
    assert any(option in n for n in names), (names, str(exc))
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["-r", "t:1-9999"], "region 't:1-9999': END 9,999 is past the end of t (3,000 bp)"),
        (["-r", "chr9"], "region 'chr9': contig 'chr9' is not in the FASTA"),
        (["--stride", "100"], "stride must be a multiple of 6 bases"),
        (["--window", "600"], "window must be a multiple of 6 bases between 6 and 234"),
    ],
)
def test_errors_name_what_is_wrong(
    short_folder: Path, tmp_path: Path, extra: list[str], message: str
) -> None:
    result = run(["track", "-m", short_folder, "--fasta", OOV_FA, "-o", tmp_path / "o", *extra])
    assert result.exit_code == 2
    assert message in error_message(result)


def test_bedgraph_without_pybigwig(
    short_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pyBigWig", None)
    result = run(["track", "-m", short_folder, "--fasta", OOV_FA, "-r", "short", "-o", tmp_path / "o"])
    assert result.exit_code == 2 and "pip install 'hexamer[tracks]'" in error_message(result)
    summary = run_json(
        [
            "track",
            "-m",
            short_folder,
            "--fasta",
            OOV_FA,
            "-r",
            "short",
            "-o",
            tmp_path / "o",
            "--format",
            "bedgraph",
        ]
    )
    assert summary["bases"] == 30 and all(f.endswith(".bedGraph") for f in summary["files"])


def test_a_bad_region_fails_before_the_model_loads(tmp_path: Path) -> None:
    missing_model = tmp_path / "no-such-model"
    result = run(["track", "-m", missing_model, "--fasta", OOV_FA, "-r", "t:5-1", "-o", tmp_path / "o"])
    assert result.exit_code == 2
    assert "region 't:5-1': need 1 <= START <= END" in error_message(result)


def test_hub_warns_about_contig_names(short_folder: Path, tmp_path: Path) -> None:
    from tests.tracks.conftest import CHR20

    args = ["track", "-m", short_folder, "--fasta", CHR20, "-r", "20:59901-60000", "-o", tmp_path / "o"]
    summary = run_json([*args, "--hub", "--genome", "hg19"])
    assert "not named like hg19's" in summary["warnings"][0]
    assert "warnings" not in run_json([*args, "--hub", "--genome", "b37"])


def test_failed_windows_are_counted_and_exit_1(overflow_folder: Path, tmp_path: Path) -> None:
    import json

    from tests.tracks.conftest import CHR20

    out = tmp_path / "tracks"
    args = ["track", "-m", overflow_folder, "--fasta", CHR20, "--region", "20:60001-60200"]
    result = run([*args, "-o", out, "--kinds", "logprob", "--format", "bedgraph", "--json"])
    assert result.exit_code == 1
    assert error_message(result).startswith("200 bases in 1 windows failed and are absent from the files")
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["bases_failed"] == 200 and summary["bases_scored"] == 0 and summary["bases_absent"] == 0
    assert np.isnan(bedgraph_values(out / "logprob_ref.bedGraph", "20", 60_000, 60_200)).all()
