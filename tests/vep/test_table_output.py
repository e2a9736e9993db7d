"""INFO fields carried into tables: a value of an Integer or Float field that is not a number
(htslib reads ``AF=not_a_number`` as missing and ``DP=12x`` as 12) fails the record's rows,
naming the line and the field, instead of an empty or truncated cell on an ``ok`` row."""

from __future__ import annotations

import csv
from pathlib import Path

import pyarrow.parquet as pq
import pysam

from hexamer import Carbon
from hexamer.io.vcf.reader import read_vcf
from hexamer.vep import run_vep
from hexamer.vep.table_output import malformed_number, resolve_info_fields

from .conftest import FASTA, MALFORMED_NUMBERS_VCF


def _rows(out: Path) -> list[dict]:
    if out.suffix == ".parquet":
        return pq.read_table(out).to_pylist()
    with open(out, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def test_a_malformed_number_fails_its_rows_naming_the_field(carbon: Carbon, tmp_path: Path) -> None:
    for suffix in (".parquet", ".tsv"):
        out = tmp_path / f"n{suffix}"
        result = run_vep(
            carbon,
            MALFORMED_NUMBERS_VCF,
            FASTA,
            out,
            window=600,
            info_fields="AF,DP,AC",
            on_note=lambda _: None,
        )
        rows = _rows(out)
        by_id = {(r["id"], int(r["alt_index"])): r for r in rows}
        failed = {key: r["reason"] for key, r in by_id.items() if r["status"] == "failed"}
        assert failed == {
            ("af_word", 0): "malformed VCF line 9: INFO field AF value 'not_a_number' is not a Float",
            ("dp_suffix", 0): "malformed VCF line 10: INFO field DP value '12x' is not an Integer",
            ("second_alt", 0): "malformed VCF line 11: INFO field AF value 'oops' is not a Float",
            ("second_alt", 1): "malformed VCF line 11: INFO field AF value 'oops' is not a Float",
            ("ac_float", 0): "malformed VCF line 13: INFO field AC value '2.5' is not an Integer",
        }
        assert all(by_id[key]["score"] in (None, "") for key in failed)
        assert result.status_counts == {"ok": 3, "failed": 5}
        good, missing, nan = by_id[("good", 0)], by_id[("missing", 0)], by_id[("note_only", 0)]
        assert good["status"] == missing["status"] == nan["status"] == "ok"
        if suffix == ".parquet":
            assert (good["info_AF"], good["info_DP"], good["info_AC"]) == (0.25, 31, "1,2")
            assert missing["info_AF"] is None and missing["info_DP"] is None  # '.' is missing, not malformed


def test_only_the_fields_asked_for_are_checked(carbon: Carbon, tmp_path: Path) -> None:
    out = tmp_path / "s.tsv"
    result = run_vep(
        carbon, MALFORMED_NUMBERS_VCF, FASTA, out, window=600, info_fields="AF", on_note=lambda _: None
    )
    failed = sorted(r["id"] for r in _rows(out) if r["status"] == "failed")
    assert failed == ["af_word", "second_alt", "second_alt"]  # DP=12x and AC=2.5 were not asked for
    assert result.status_counts == {"ok": 5, "failed": 3}
    plain = run_vep(
        carbon, MALFORMED_NUMBERS_VCF, FASTA, tmp_path / "p.tsv", window=600, on_note=lambda _: None
    )
    assert plain.status_counts == {"ok": 8}  # without --info-fields nothing is read


def test_typed_records_without_their_text_are_taken_as_read(tmp_path: Path) -> None:
    fields = resolve_info_fields(MALFORMED_NUMBERS_VCF, "AF,DP")
    bcf = tmp_path / "n.bcf"
    with (
        pysam.VariantFile(str(MALFORMED_NUMBERS_VCF)) as src,
        pysam.VariantFile(str(bcf), "wb", header=src.header) as dst,
    ):
        for rec in src:
            dst.write(rec)
    assert [malformed_number(r, fields) for r in read_vcf(bcf, keep_records=True)] == [None] * 7
    text = [malformed_number(r, fields) for r in read_vcf(MALFORMED_NUMBERS_VCF, keep_records=True)]
    assert [t is not None for t in text] == [False, True, True, True, False, False, False]
