"""Variant effects of a head folder: prediction(alt window) - prediction(ref window) per output,
with the statuses, reasons, outputs and resume of ``hexamer vep``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pysam
import pytest

from hexamer import Carbon
from hexamer.finetune.apply import Predictor
from hexamer.finetune.effects import effect_columns, run_effects, score_output
from hexamer.io.reference import Reference
from hexamer.testing.heads import build_head_folder
from hexamer.testing.interrupts import Killed, kill_after
from hexamer.vep import score_variants

DATA = Path(__file__).resolve().parents[1] / "data" / "vep"
FASTA = DATA / "chr20_slice.fa.gz"
VCFS = [DATA / "edge_cases.vcf", DATA / "malformed.vcf", DATA / "ref_equals_alt.vcf", DATA / "oov_cases.vcf"]
WINDOW = 60


@pytest.fixture(scope="module")
def predictor(tmp_path_factory: pytest.TempPathFactory) -> Predictor:
    return Predictor.load(build_head_folder(tmp_path_factory.mktemp("heads") / "reg", max_length=WINDOW))


@pytest.fixture(scope="module")
def binary(tmp_path_factory: pytest.TempPathFactory) -> Predictor:
    folder = build_head_folder(tmp_path_factory.mktemp("heads") / "bin", kind="binary", max_length=WINDOW)
    return Predictor.load(folder)


def _table(path: Path) -> list[dict]:
    return pq.read_table(path).to_pylist()


def test_snv_effects_equal_predictions_of_hand_made_windows(predictor: Predictor, tmp_path: Path) -> None:
    vcf = tmp_path / "snv.vcf"
    sites = [(62000, "C", "A"), (62000, "C", "T"), (63000, "A", "G"), (120001, None, "G")]
    with Reference(FASTA) as ref:
        sites[-1] = (
            120001,
            ref.fetch("20", 120000, 120001),
            "C" if ref.fetch("20", 120000, 120001) != "C" else "A",
        )
        windows = []
        for pos, base, alt in sites:
            p0 = pos - 1
            seq = ref.fetch("20", p0 - WINDOW // 2, p0 + WINDOW - WINDOW // 2)
            assert seq[WINDOW // 2] == base
            windows.append((seq, seq[: WINDOW // 2] + alt + seq[WINDOW // 2 + 1 :]))
    lines = [
        "##fileformat=VCFv4.2",
        "##contig=<ID=20,length=440000>",
        "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO",
    ]
    lines += [f"20\t{pos}\ts{i}\t{base}\t{alt}\t.\t.\t." for i, (pos, base, alt) in enumerate(sites)]
    vcf.write_text("\n".join(lines) + "\n")
    out = tmp_path / "eff.parquet"
    result = run_effects(predictor, vcf, FASTA, out, on_note=lambda _: None)
    assert result.status_counts == {"ok": len(sites)}
    rows = _table(out)
    values = predictor.predict([w for pair in windows for w in pair])[:, 0]
    want = values[1::2] - values[0::2]
    np.testing.assert_allclose([r["activity"] for r in rows], want, rtol=1e-5, atol=1e-7)
    assert [r["score"] for r in rows] == [r["activity"] for r in rows]  # one target: it is the score
    assert all(r["n_scored_bp"] == WINDOW for r in rows)


@pytest.mark.parametrize("vcf", VCFS, ids=lambda p: p.stem)
def test_statuses_and_reasons_match_hexamer_vep(
    predictor: Predictor, tiny_folder: Path, vcf: Path, tmp_path: Path
) -> None:
    out = tmp_path / "eff.parquet"
    run_effects(predictor, vcf, FASTA, out, on_note=lambda _: None)
    mine = [(r["record"], r["alt_index"], r["status"], r["reason"], r["n_oov_bp"]) for r in _table(out)]
    carbon = Carbon.from_pretrained(tiny_folder)
    theirs = [
        (r["record"], r["alt_index"], r["status"], r["reason"], r["n_oov_bp"])
        for r in score_variants(carbon, vcf, FASTA, window=WINDOW, on_note=lambda _: None)
    ]
    assert mine == theirs
    assert {s for _, _, s, _, _ in mine} - {"ok"}  # each file holds records not scored


def test_ref_equals_alt_is_skipped(predictor: Predictor, tmp_path: Path) -> None:
    out = tmp_path / "eff.tsv"
    run_effects(predictor, DATA / "ref_equals_alt.vcf", FASTA, out)
    last = out.read_text().splitlines()[-1].split("\t")
    assert "skipped" in last and any("ALT equals REF" in x for x in last)


def test_classification_effects_in_vcf_info(binary: Predictor, tmp_path: Path) -> None:
    assert score_output(binary.task) == 1
    assert list(effect_columns(binary.task)) == ["p_neg", "p_pos"]
    out = tmp_path / "eff.vcf"
    run_effects(binary, DATA / "chr20_slice.vcf", FASTA, out, on_note=lambda _: None)
    with pysam.VariantFile(str(out)) as f:
        assert {"HEXAMER_p_neg", "HEXAMER_p_pos", "HEXAMER_SCORE"} <= set(f.header.info)
        recs = list(f)
    ok = [r for r in recs if r.info["HEXAMER_STATUS"][0] == "ok"]
    assert ok
    for r in ok:
        neg, pos = r.info["HEXAMER_p_neg"][0], r.info["HEXAMER_p_pos"][0]
        assert neg == pytest.approx(-pos, abs=1e-5)  # two probabilities summing to 1 move oppositely
        assert r.info["HEXAMER_SCORE"][0] == pytest.approx(pos, abs=1e-6)


def test_resume_gives_the_uninterrupted_output(predictor: Predictor, tmp_path: Path) -> None:
    vcf = DATA / "edge_cases.vcf"
    whole = tmp_path / "whole.vcf"
    run_effects(predictor, vcf, FASTA, whole, on_note=lambda _: None)
    part = tmp_path / "part.vcf"
    with pytest.raises(Killed):
        run_effects(
            predictor, vcf, FASTA, part, checkpoint_rows=1, on_progress=kill_after(12), on_note=lambda _: None
        )
    assert not part.exists()
    result = run_effects(predictor, vcf, FASTA, part, resume=True, checkpoint_rows=1, on_note=lambda _: None)
    assert result.n_resumed > 0
    strip = lambda text: [x for x in text.splitlines() if not x.startswith("##hexamer_command")]  # noqa: E731
    assert strip(part.read_text()) == strip(whole.read_text())


def test_window_defaults_to_the_training_length(tmp_path: Path) -> None:
    folder = build_head_folder(tmp_path / "nolen", max_length=None)
    predictor = Predictor.load(folder)
    with pytest.raises(ValueError, match="no training sequence length"):
        run_effects(predictor, DATA / "chr20_slice.vcf", FASTA, tmp_path / "x.tsv")
    result = run_effects(predictor, DATA / "chr20_slice.vcf", FASTA, tmp_path / "x.tsv", window=40)
    assert result.status_counts.get("ok")


def test_resume_refuses_another_head(predictor: Predictor, binary: Predictor, tmp_path: Path) -> None:
    from hexamer.vep.job import ResumeError

    out = tmp_path / "eff.tsv"
    with pytest.raises(Killed):
        run_effects(
            predictor,
            DATA / "edge_cases.vcf",
            FASTA,
            out,
            checkpoint_rows=1,
            on_progress=kill_after(12),
            on_note=print,
        )
    with pytest.raises(ResumeError, match="different job"):
        run_effects(binary, DATA / "edge_cases.vcf", FASTA, out, resume=True, on_note=lambda _: None)
