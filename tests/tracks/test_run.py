"""``run_tracks``: bigWig values read back with pyBigWig equal ``Carbon.base_logprobs`` (absent
where a base is unscored), bedGraph equals bigWig, long regions follow the window rule."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pysam
import pytest

from hexamer import Carbon
from hexamer.tracks import run_tracks, scored_bases, strided_base_logprobs, track_values
from tests.tracks.conftest import CHR20, OOV_FA
from tests.tracks.helpers import bedgraph_values, bigwig_values


def _fetch(path: Path, contig: str, start: int, end: int) -> str:
    with pysam.FastaFile(str(path)) as fa:
        return fa.fetch(contig, start, end).upper()


def _check_tracks(out: Path, contig: str, start: int, seq: str, lp: np.ndarray, kinds: list[str]) -> None:
    """Every track file equals the formula applied to ``lp``, NaN (absent) where unscored."""
    lp = lp.copy()
    lp[~scored_bases(seq, 6)] = np.nan
    expected = track_values(lp, seq, kinds)
    end = start + len(seq)
    for name, values in expected.items():
        got = bigwig_values(out / f"{name}.bw", contig, start, end)
        np.testing.assert_allclose(got, values, rtol=0, atol=1e-6, err_msg=name)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(values))
        bedgraph = out / f"{name}.bedGraph"
        if bedgraph.exists():
            np.testing.assert_array_equal(bedgraph_values(bedgraph, contig, start, end), got)


def test_region_that_fits_equals_base_logprobs(short_model: Carbon, tmp_path: Path) -> None:
    # 0-based 59,900-60,100 of the chr20 slice: 100 N of the telomere gap, then real bases
    result = run_tracks(
        short_model,
        CHR20,
        tmp_path,
        regions=["20:59901-60100"],
        kinds=["logprob", "prob", "entropy", "llr"],
        formats=["bigwig", "bedgraph"],
    )
    seq = _fetch(CHR20, "20", 59_900, 60_100)
    assert seq[:100] == "N" * 100 and "N" not in seq[102:]
    kinds = ["logprob", "prob", "entropy", "llr"]
    _check_tracks(tmp_path, "20", 59_900, seq, short_model.base_logprobs(seq), kinds)
    absent = int((~scored_bases(seq, 6)).sum())
    assert absent == 102  # the 6-mer holding the last N reaches 2 bases into the sequence
    assert result.n_bases == 200 and result.n_scored == 200 - absent and result.n_absent == absent
    assert np.isnan(bigwig_values(tmp_path / "llr.bw", "20", 59_800, 59_900)).all()  # outside: absent
    assert np.isnan(bigwig_values(tmp_path / "llr.bw", "20", 60_100, 60_200)).all()


@pytest.mark.parametrize(("window", "stride"), [(120, 60), (234, 234), (66, 6)])
def test_long_region_follows_the_window_rule(
    short_model: Carbon, tmp_path: Path, window: int, stride: int
) -> None:
    result = run_tracks(
        short_model,
        OOV_FA,
        tmp_path,
        regions=["t:1101-2400"],
        window=window,
        stride=stride,
        kinds=["logprob", "llr"],
        formats=["bigwig", "bedgraph.gz"],
    )
    seq = _fetch(OOV_FA, "t", 1100, 2400)
    lp = strided_base_logprobs(short_model, seq, stride=stride, window=window)
    _check_tracks(tmp_path, "t", 1100, seq, lp, ["logprob", "llr"])
    for name in ("logprob_A", "llr"):
        np.testing.assert_array_equal(
            bedgraph_values(tmp_path / f"{name}.bedGraph.gz", "t", 1100, 2400),
            bigwig_values(tmp_path / f"{name}.bw", "t", 1100, 2400),
        )
    got = bigwig_values(tmp_path / "logprob_ref.bw", "t", 1100, 2400)
    # the NNNNN at 1,500-1,504 and the N at 2,200: whole 6-mers (cut from the region start) absent
    assert np.isnan(got[396:408]).all() and np.isnan(got[1098:1104]).all()
    assert result.n_absent == 12 + 6 and (result.window, result.stride) == (window, stride)


def test_whole_fasta_and_contig_sizes(short_model: Carbon, tmp_path: Path) -> None:
    import pyBigWig

    result = run_tracks(short_model, OOV_FA, tmp_path, kinds=["entropy"], window=234, stride=114)
    handle = pyBigWig.open(str(tmp_path / "entropy.bw"))
    assert handle.chroms() == {"t": 3000, "short": 30}
    handle.close()
    assert [str(r) for r in result.regions] == ["t:1-3000", "short:1-30"]
    short = _fetch(OOV_FA, "short", 0, 30)
    _check_tracks(tmp_path, "short", 0, short, short_model.base_logprobs(short), ["entropy"])


def test_n_windows_cost_no_forward(short_model: Carbon, tmp_path: Path) -> None:
    result = run_tracks(short_model, CHR20, tmp_path, regions=["20:1-2000"], kinds=["llr"])
    assert result.n_scored == 0 and result.forward_tokens == [] and result.n_windows > 1
    assert np.isnan(bigwig_values(tmp_path / "llr.bw", "20", 0, 2000)).all()


def test_a_failing_run_leaves_no_file(
    short_model: Carbon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []
    real = short_model.base_logprobs

    def flaky(sequence: str, **options: object) -> np.ndarray:
        calls.append(1)
        if len(calls) > 2:
            raise RuntimeError("device lost")
        return real(sequence, **options)

    monkeypatch.setattr(short_model, "base_logprobs", flaky)
    with pytest.raises(RuntimeError, match="device lost"):
        run_tracks(short_model, OOV_FA, tmp_path / "out", regions=["t"], formats=["bigwig", "bedgraph"])
    assert list((tmp_path / "out").iterdir()) == []


def test_options_are_checked_before_any_forward(short_model: Carbon, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="multiple of 6"):
        run_tracks(short_model, OOV_FA, tmp_path, stride=100)
    with pytest.raises(ValueError, match="window must be a multiple of 6 bases between 6 and 234"):
        run_tracks(short_model, OOV_FA, tmp_path, window=240)
    with pytest.raises(ValueError, match="track hub needs the bigwig"):
        run_tracks(short_model, OOV_FA, tmp_path, formats=["bedgraph"], hub_genome="hg38")
    with pytest.raises(ValueError, match="region 't:1-5000'"):
        run_tracks(short_model, OOV_FA, tmp_path, regions=["t:1-5000"])
    assert list(tmp_path.iterdir()) == []


def test_a_window_with_non_finite_output_is_failed_and_left_out(
    short_model: Carbon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hexamer.model.finite import NonFiniteOutputError, non_finite_output

    base_logprobs = short_model.base_logprobs
    calls = []

    def second_window_fails(text: str, **options: object) -> np.ndarray:
        calls.append(text)
        if len(calls) == 2:
            raise NonFiniteOutputError(non_finite_output("base log-probabilities"))
        return base_logprobs(text, **options)

    monkeypatch.setattr(short_model, "base_logprobs", second_window_fails)
    result = run_tracks(
        short_model, CHR20, tmp_path, regions=["20:60001-60600"], kinds=["logprob"], formats=["bedgraph"],
        window=120, stride=60,
    )  # fmt: skip
    assert result.n_failed_windows == 1 and result.n_failed == 60  # the second window keeps 60 bases
    assert result.failures == [f"20:60121-60180: {non_finite_output('base log-probabilities')}"]
    assert result.n_scored == 600 - 60 and result.n_absent == 0
    summary = result.summary()
    assert summary["bases_failed"] == 60 and summary["windows_failed"] == 1
    values = bedgraph_values(tmp_path / "logprob_ref.bedGraph", "20", 60_000, 60_600)
    assert np.isnan(values[120:180]).all() and not np.isnan(np.delete(values, range(120, 180))).any()
