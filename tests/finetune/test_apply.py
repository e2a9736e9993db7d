"""Applying a head folder to sequence files and BED regions: every record a row, values equal to
the model half's `predict` with the folder's label transform inverted, strands honoured."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hexamer.finetune.apply import (
    HeadFolderError,
    Predictor,
    check_head_folder,
    output_columns,
    predict_records,
    predict_regions,
    write_predictions,
)
from hexamer.finetune.predict import predict
from hexamer.io import reverse_complement
from hexamer.io.reference import Reference
from hexamer.testing.heads import build_head_folder

FASTA = Path(__file__).resolve().parents[1] / "data" / "vep" / "chr20_slice.fa.gz"


@pytest.fixture(scope="module")
def heads(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("heads")
    return {
        "regression": build_head_folder(root / "reg"),
        "binary": build_head_folder(root / "bin", kind="binary", rc_average=True),
    }


def _rows(chunks) -> list[dict]:
    return [r for rows in chunks for r in rows]


def test_every_record_is_a_row_with_raw_scale_values(heads: dict[str, Path], tmp_path: Path) -> None:
    fa = tmp_path / "in.fa"
    good = ["ACGTACGTAAGGCTAGCTAGGATCGATCGATCGAT", "acgtnnryACGATCGATCGTAGCTAGCTAGuuu"]
    fa.write_text(f">a\n{good[0]}\n>empty\n\n>bad\nACGTXX\n>a\nACGT\n>d\n{good[1]}\n")
    predictor = Predictor.load(heads["regression"])
    rows = _rows(predict_records(predictor, fa, chunk=2))
    assert [(r["record"], r["id"], r["status"]) for r in rows] == [
        (0, "a", "ok"),
        (1, "empty", "skipped"),
        (2, "bad", "skipped"),
        (3, "a", "skipped"),
        (4, "d", "ok"),
    ]
    assert "'X'" in rows[2]["error"] and "duplicate id" in rows[3]["error"]
    assert rows[1]["activity"] is None
    # by hand: the training rule (upper case, U -> T, ambiguity codes -> N), model-scale
    # outputs, then the z-score the folder records (mean 1.5, s.d. 2.0) undone
    clean = [good[0], "ACGTNNNNACGATCGATCGTAGCTAGCTAGTTT"]
    raw = predict(predictor.model, clean, rc_average=False)[:, 0] * 2.0 + 1.5
    np.testing.assert_allclose([rows[0]["activity"], rows[4]["activity"]], raw, rtol=1e-6)


def test_too_long_fails_its_row_only(heads: dict[str, Path], tmp_path: Path) -> None:
    predictor = Predictor.load(heads["regression"])
    fa = tmp_path / "long.fa"
    fa.write_text(f">long\n{'ACGT' * (predictor.max_bp // 4 + 2)}\n>ok\nACGTACGTACGTAAA\n")
    rows = _rows(predict_records(predictor, fa))
    assert [r["status"] for r in rows] == ["failed", "ok"]
    assert "longer than the model takes" in rows[0]["error"]


def test_classification_probabilities_and_rc_default(heads: dict[str, Path]) -> None:
    predictor = Predictor.load(heads["binary"])
    assert predictor.columns == ("p_neg", "p_pos") == output_columns(predictor.task)
    assert predictor.rc_average is True  # what the folder records
    seqs = ["ACGTTGCAAGGCTTAACG", "GGGCCCATATTTAGC"]
    p = predictor.predict(seqs)
    np.testing.assert_allclose(p.sum(1), 1.0, rtol=1e-6)
    fwd = predict(predictor.model, seqs, rc_average=False)
    rev = predict(predictor.model, [reverse_complement(s) for s in seqs], rc_average=False)
    np.testing.assert_allclose(p, (fwd + rev) / 2, rtol=1e-6)
    assert not np.allclose(Predictor.load(heads["binary"], rc_average=False).predict(seqs), p)


def test_bed_regions_are_strand_aware(heads: dict[str, Path], tmp_path: Path) -> None:
    bed = tmp_path / "r.bed"
    bed.write_text(
        "20\t62000\t62060\tplus\t0\t+\n20\t62000\t62060\tminus\t0\t-\n"
        "chrUn\t10\t70\tnowhere\t0\t+\n20\t439990\t440050\tpast_end\t0\t+\n"
    )
    predictor = Predictor.load(heads["regression"])
    rows = _rows(predict_regions(predictor, bed, FASTA))
    assert [r["status"] for r in rows] == ["ok", "ok", "skipped", "skipped"]
    assert "not in the FASTA" in rows[2]["error"] and "past the end" in rows[3]["error"]
    with Reference(FASTA) as ref:
        seq = ref.fetch("20", 62000, 62060)
    want = predictor.predict([seq, reverse_complement(seq)])[:, 0]
    np.testing.assert_allclose([rows[0]["activity"], rows[1]["activity"]], want, rtol=1e-6)
    assert rows[0]["activity"] != rows[1]["activity"]
    out = tmp_path / "p.parquet"
    counts = write_predictions(out, predictor, predict_regions(predictor, bed, FASTA), regions=True)
    assert counts == {"ok": 2, "skipped": 2}
    import pyarrow.parquet as pq

    table = pq.read_table(out)
    assert table.column_names == [
        "record",
        "id",
        "chrom",
        "start",
        "end",
        "strand",
        "status",
        "error",
        "activity",
    ]
    assert table.num_rows == 4


def test_language_model_folder_is_refused(tiny_folder: Path) -> None:
    with pytest.raises(HeadFolderError, match="language model folder, not a fine-tuned head"):
        check_head_folder(tiny_folder)
    with pytest.raises(HeadFolderError):
        Predictor.load(tiny_folder)
