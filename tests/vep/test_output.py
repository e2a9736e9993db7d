"""Annotated VCF/BCF and table outputs."""

from __future__ import annotations

import csv
import json
import random
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pysam
import pytest

from hexamer import Carbon
from hexamer.io import TableWriter
from hexamer.vep import (
    INFO_RECIPE,
    INFO_SCORE,
    INFO_STATUS,
    ROW_COLUMNS,
    output_kind,
    read_vcf,
    score_variants,
    table_output,
    write_rows,
    write_vcf,
    write_vep_output,
)
from hexamer.vep import vcf_output as output_mod
from hexamer.vep.table_output import TABLE_BATCH_ROWS

from .conftest import EDGE_VCF, FASTA, MALFORMED_VCF, REF_EQUALS_ALT_VCF, SLICE_VCF, UNREADABLE_VCF


def _rows(carbon: Carbon, vcf: Path) -> list[dict]:
    return list(score_variants(carbon, vcf, FASTA, recipe="window", window=600, on_note=lambda _: None))


def test_output_kind() -> None:
    assert output_kind("a.vcf.gz") == output_kind("a.bcf") == output_kind("a.VCF") == "vcf"
    assert output_kind("a.parquet") == output_kind("a.tsv") == "table"
    with pytest.raises(ValueError, match="supported extensions"):
        output_kind("a.xlsx")


def test_sorted_vcf_gz_is_indexed_and_reads_back(carbon: Carbon, tmp_path: Path) -> None:
    rows = _rows(carbon, SLICE_VCF)
    out = tmp_path / "scored.vcf.gz"
    result = write_vcf(out, SLICE_VCF, rows, recipe="window")
    assert result.n_records == 9 and result.n_malformed == 0
    assert result.index == str(out) + ".tbi" and Path(result.index).exists()
    with pysam.VariantFile(str(out)) as vf:
        info = vf.header.info
        assert info[INFO_SCORE].number == "A" and info[INFO_SCORE].type == "Float"
        assert info[INFO_STATUS].number == "A" and info[INFO_STATUS].type == "String"
        assert info[INFO_RECIPE].number == 1
        records = list(vf)
        assert len(records) == 9
        for rec, row in zip(records, rows, strict=True):
            # VCF text keeps ~6 significant digits (htslib's %g); tables keep full precision
            assert rec.info[INFO_SCORE][0] == pytest.approx(row["score"], rel=1e-5)
            assert rec.info[INFO_STATUS] == ("ok",)
            assert rec.info[INFO_RECIPE] == "window"
            assert rec.info["AN"] > 0  # input INFO kept
        assert [r.pos for r in vf.fetch("20", 60_300, 61_000)] == [60309, 60573, 60828]  # the index works


def test_unsorted_vcf_keeps_every_record_and_drops_a_stale_index(carbon: Carbon, tmp_path: Path) -> None:
    rows = _rows(carbon, EDGE_VCF)
    out = tmp_path / "edge.vcf.gz"
    stale = tmp_path / "edge.vcf.gz.tbi"
    stale.write_bytes(b"old")
    result = write_vcf(out, EDGE_VCF, rows, recipe="window")
    assert result.index is None and not stale.exists()
    with pysam.VariantFile(str(out)) as vf:
        records = list(vf)
    assert len(records) == len(list(read_vcf(EDGE_VCF)))  # every input record is there
    by_id = {r.id: r for r in records}
    assert by_id["multi_snv"].info[INFO_STATUS] == ("ok", "ok", "ok")
    assert by_id["star"].info[INFO_STATUS] == ("ok", "skipped")
    assert by_id["star"].info[INFO_SCORE][1] is None
    assert by_id["ref_mismatch"].info[INFO_STATUS] == ("ref_mismatch",)
    assert INFO_SCORE not in by_id["no_alt"].info and by_id["no_alt"].info[INFO_RECIPE] == "window"
    assert by_id["sv_del"].info["SVTYPE"] == "DEL"


@pytest.mark.parametrize("name", ["x.vcf", "x.bcf"])
def test_plain_vcf_and_bcf(carbon: Carbon, tmp_path: Path, name: str) -> None:
    rows = _rows(carbon, MALFORMED_VCF)
    out = tmp_path / name
    result = write_vcf(out, MALFORMED_VCF, rows, recipe="window")
    assert result.n_malformed == 2  # two lines htslib cannot parse
    # 'too_few' (3 columns) still has CHROM and POS: a failed stand-in record; 'bad_pos' has no
    # position a VCF can hold: its row goes to the rejects table
    assert result.n_records == 6 and result.n_rejected == 1
    assert result.index is None  # plain VCF is never indexed; this BCF is unsorted (POS 0)
    with pysam.VariantFile(str(out)) as vf:
        statuses = {r.id: (r.pos, r.info[INFO_STATUS][0]) for r in vf}
    assert statuses == {
        "good1": (60309, "ok"),
        "too_few": (60573, "failed"),
        "good2": (60828, "ok"),
        "bad_ref": (60900, "failed"),
        "pos_zero": (0, "failed"),
        "good3": (61098, "ok"),
    }
    assert result.rejects == str(out) + ".rejects.tsv"
    with open(result.rejects, newline="") as f:
        rejected = list(csv.DictReader(f, delimiter="\t"))
    assert [(r["id"], r["status"]) for r in rejected] == [("bad_pos", "failed")]
    assert "POS 'sixty' is not a number" in rejected[0]["reason"]


def test_sorted_bcf_gets_a_csi_index(carbon: Carbon, tmp_path: Path) -> None:
    out = tmp_path / "scored.bcf"
    result = write_vcf(out, SLICE_VCF, _rows(carbon, SLICE_VCF), recipe="window")
    assert result.index == str(out) + ".csi"
    with pysam.VariantFile(str(out)) as vf:
        assert len(list(vf.fetch("20", 421_000, 422_000))) == 2


def test_existing_conflicting_header_field_is_refused(carbon: Carbon, tmp_path: Path) -> None:
    src = tmp_path / "in.vcf"
    text = SLICE_VCF.read_text().replace(
        "#CHROM", '##INFO=<ID=HEXAMER_SCORE,Number=1,Type=String,Description="other tool">\n#CHROM', 1
    )
    src.write_text(text)
    with pytest.raises(ValueError, match="already defines INFO HEXAMER_SCORE"):
        write_vcf(tmp_path / "out.vcf", src, [], recipe="window")
    assert not (tmp_path / "out.vcf").exists()


@pytest.mark.parametrize("ext", ["parquet", "tsv", "csv", "jsonl"])
def test_table_outputs_hold_every_row(carbon: Carbon, tmp_path: Path, ext: str) -> None:
    rows = _rows(carbon, EDGE_VCF)
    out = tmp_path / f"scores.{ext}"
    assert write_vep_output(out, EDGE_VCF, list(reversed(rows)), recipe="window") == len(rows)
    if ext == "parquet":
        table = pq.read_table(out)
        assert table.column_names == list(ROW_COLUMNS)
        back = table.to_pylist()
        assert back == rows  # input order restored, types kept
    elif ext in ("tsv", "csv"):
        with open(out, newline="") as f:
            back = list(csv.DictReader(f, delimiter="\t" if ext == "tsv" else ","))
        assert [int(r["record"]) for r in back] == [r["record"] for r in rows]
        assert [r["status"] for r in back] == [r["status"] for r in rows]
    else:
        assert len(out.read_text().splitlines()) == len(rows)


def test_empty_table_still_has_columns(tmp_path: Path) -> None:
    write_rows(tmp_path / "none.tsv", [])
    assert (tmp_path / "none.tsv").read_text().strip().split("\t") == list(ROW_COLUMNS)
    write_rows(tmp_path / "none.parquet", [])
    assert pq.read_table(tmp_path / "none.parquet").column_names == list(ROW_COLUMNS)


def test_undeclared_tags_and_samples_survive(carbon: Carbon, tmp_path: Path) -> None:
    # htslib ends the process when it translates a record parsed with an undeclared tag; the
    # writer must declare them first. Genotypes must come through untouched.
    src = tmp_path / "undeclared.vcf"
    src.write_text(
        "##fileformat=VCFv4.2\n"
        '##FORMAT=<ID=GT,Number=1,Type=String,Description="Genotype">\n'
        "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\tFORMAT\tS1\tS2\n"
        "20\t60309\tv1\tG\tT\t50\tLowQual\tDP=7;SVTYPE=X\tGT:AD\t0|1:3,4\t1/1:0,9\n"
        "20\t62400\tv2\tA\t<DEL>\t.\tPASS\tEND=62900\tGT\t0/1\t./.\n"
    )
    rows = list(score_variants(carbon, src, FASTA, window=600))
    out = tmp_path / "out.vcf.gz"
    result = write_vcf(out, src, rows, recipe="window")
    assert result.n_records == 2
    with pysam.VariantFile(str(out)) as vf:
        recs = list(vf)
    assert recs[0].info["DP"] in ("7", 7) and list(recs[0].filter) == ["LowQual"]
    assert recs[0].samples["S1"]["GT"] == (0, 1) and recs[0].samples["S1"].phased
    assert recs[0].samples["S2"]["GT"] == (1, 1)
    assert recs[0].info[INFO_STATUS] == ("ok",)
    assert recs[1].stop == 62900 and recs[1].info[INFO_STATUS] == ("skipped",)


# --------------------------------------------------------------------------- streamed (presorted) rows


def _synthetic(n: int, counter: list[int] | None = None) -> Iterator[dict]:
    """``n`` result rows in (record, alt_index) order, made one at a time (``counter[0]``: made so far)."""
    for i in range(n):
        if counter is not None:
            counter[0] += 1
        yield {
            "record": i // 2,
            "alt_index": i % 2,
            "id": f"rs{i}",
            "chrom": "20",
            "pos": 1000 + i // 2,
            "ref": "A",
            "alt": "GT"[i % 2],
            "kind": "SNV",
            "recipe": "window",
            "score": i / 7,
            "status": "ok",
            "reason": None,
        }


@pytest.mark.parametrize("ext", ["parquet", "tsv"])
def test_presorted_rows_stream_in_batches(tmp_path: Path, ext: str, monkeypatch: pytest.MonkeyPatch) -> None:
    made = [0]
    written: list[tuple[int, int]] = []  # (rows in the batch, rows made when it was written)
    original = TableWriter.write_batch

    def spy(self: TableWriter, rows: Any) -> None:
        written.append((len(rows), made[0]))
        original(self, rows)

    monkeypatch.setattr(TableWriter, "write_batch", spy)
    n = 2 * TABLE_BATCH_ROWS + 123
    out = tmp_path / f"streamed.{ext}"
    assert write_rows(out, _synthetic(n, made), presorted=True) == n
    assert [size for size, _ in written] == [TABLE_BATCH_ROWS, TABLE_BATCH_ROWS, 123]
    total = 0
    for size, made_then in written:
        total += size
        assert made_then <= total + 1  # never more than one batch (and one row) ahead of the file
    # the same rows given unsorted, in memory, make the same file
    shuffled = list(_synthetic(n))
    random.Random(0).shuffle(shuffled)
    again = tmp_path / f"in_memory.{ext}"
    assert write_rows(again, shuffled) == n
    assert again.read_bytes() == out.read_bytes()


def test_streaming_write_rows_memory_stays_flat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(table_output, "TABLE_BATCH_ROWS", 4096)  # smaller batches: a quicker test
    n = 100_000
    tracemalloc.start()
    try:
        sample = list(_synthetic(n // 10))
        list_cost = 10 * tracemalloc.get_traced_memory()[0]  # what a list of all n rows would take
        del sample
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        assert write_rows(tmp_path / "big.parquet", _synthetic(n), presorted=True) == n
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert peak < list_cost / 5, (peak, list_cost)
    assert pq.ParquetFile(tmp_path / "big.parquet").metadata.num_rows == n


def test_presorted_rows_out_of_order_are_refused(carbon: Carbon, tmp_path: Path) -> None:
    rows = list(_synthetic(10))
    rows[3], rows[7] = rows[7], rows[3]
    with pytest.raises(ValueError, match="not sorted"):
        write_rows(tmp_path / "x.tsv", iter(rows), presorted=True)
    assert not (tmp_path / "x.tsv").exists()
    scored = _rows(carbon, SLICE_VCF)
    with pytest.raises(ValueError, match="not sorted"):
        write_vcf(tmp_path / "x.vcf.gz", SLICE_VCF, reversed(scored), recipe="window", presorted=True)
    assert not (tmp_path / "x.vcf.gz").exists()


@pytest.mark.parametrize("vcf", [EDGE_VCF, MALFORMED_VCF], ids=["edge", "malformed"])
def test_vcf_reads_presorted_rows_alongside_the_records(
    carbon: Carbon, tmp_path: Path, vcf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = _rows(carbon, vcf)
    ahead: list[int] = []  # per record written: rows taken beyond those of records up to it
    taken = [0]

    def counted() -> Iterator[dict]:
        for row in rows:
            taken[0] += 1
            yield row

    original = output_mod.read_vcf

    def spying_read_vcf(path: Any, **kw: Any) -> Iterator[Any]:
        for item in original(path, **kw):
            yield item
            ahead.append(taken[0] - sum(r["record"] < item.index for r in rows))

    monkeypatch.setattr(output_mod, "read_vcf", spying_read_vcf)
    streamed = tmp_path / "streamed.vcf.gz"
    write_vcf(streamed, vcf, counted(), recipe="window", presorted=True)
    assert ahead and max(ahead) <= max(r["alt_index"] for r in rows) + 2  # its own rows and one more
    monkeypatch.setattr(output_mod, "read_vcf", original)
    in_memory = tmp_path / "in_memory.vcf.gz"
    write_vcf(in_memory, vcf, list(reversed(rows)), recipe="window")
    assert _vcf_body(streamed) == _vcf_body(in_memory)


def _vcf_body(path: Path) -> list[str]:
    with pysam.VariantFile(str(path)) as vf:
        return [str(vf.header), *(str(r) for r in vf)]


# --------------------------------------------------------------------------- hostile records, provenance, INFO columns

SYMBOLIC_VCF = (
    "##fileformat=VCFv4.2\n"
    "##contig=<ID=20,length=440000>\n"
    "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n"
    "20\t60309\tsnv\tG\tT\t.\tPASS\t.\n"
    "20\t62400\tsv_del\tA\t<DEL>\t.\tPASS\t.\n"
    "20\t62500\tmixed\tG\tA,<INS>,<*>\t.\tPASS\t.\n"
)


@pytest.mark.parametrize("name", ["out.vcf", "out.vcf.gz", "out.bcf"])
def test_symbolic_alts_without_header_lines_are_written(carbon: Carbon, tmp_path: Path, name: str) -> None:
    # htslib refuses to format a record with a <...> allele while END is undeclared ("Can't write
    # record" after all the scoring; a .bcf was left with an index that could not be built)
    src = tmp_path / "symbolic.vcf"
    src.write_text(SYMBOLIC_VCF)
    out = tmp_path / name
    result = write_vcf(out, src, _rows(carbon, src), recipe="window")
    assert result.n_records == 3 and result.n_rejected == 0
    assert (result.index is not None) == (name != "out.vcf")  # sorted: indexed
    with pysam.VariantFile(str(out)) as vf:
        assert {"DEL", "INS", "*"} <= set(vf.header.alts)
        assert vf.header.info["END"].type == "Integer"
        records = list(vf.fetch("20", 62_000, 63_000)) if result.index else list(vf)[1:]
    assert [r.info[INFO_STATUS] for r in records] == [("skipped",), ("ok", "skipped", "skipped")]
    assert records[1].alts == ("A", "<INS>", "<*>")


def test_a_failure_before_publishing_leaves_the_old_files(
    carbon: Carbon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = _rows(carbon, SLICE_VCF)
    out = tmp_path / "scored.bcf"
    for path in (out, tmp_path / "scored.bcf.csi"):
        path.write_bytes(b"old")

    def broken_index(*args: Any, **kwargs: Any) -> None:
        raise OSError("building of index failed")

    monkeypatch.setattr(pysam, "tabix_index", broken_index)
    with pytest.raises(OSError, match="index failed"):
        write_vcf(out, SLICE_VCF, rows, recipe="window")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scored.bcf", "scored.bcf.csi"]
    assert out.read_bytes() == b"old" == (tmp_path / "scored.bcf.csi").read_bytes()


def test_reasons_round_trip_through_percent_encoding(carbon: Carbon, tmp_path: Path) -> None:
    from urllib.parse import unquote

    from hexamer.vep import INFO_REASON
    from hexamer.vep.vcf_header import vcf_escape

    assert vcf_escape("a b,c;d=e%f\tg\n") == "a%20b%2Cc%3Bd%3De%25f%09g%0A"
    rows = _rows(carbon, EDGE_VCF)
    out = tmp_path / "edge.vcf"
    write_vcf(out, EDGE_VCF, rows, recipe="window")
    with pysam.VariantFile(str(out)) as vf:
        records = list(vf)
        assert vf.header.info[INFO_REASON].number == "A" and vf.header.info[INFO_REASON].type == "String"
    by_key = {(r["record"], r["alt_index"]): r for r in rows}
    checked = 0
    for i, rec in enumerate(records):
        reasons = rec.info.get(INFO_REASON) or ()
        for j, reason in enumerate(reasons):
            expected = by_key[(i, j)]["reason"]
            assert (unquote(reason) if reason not in (None, ".") else None) == expected
            checked += expected is not None
    assert checked >= 8


def test_a_record_without_alt_carries_its_status_and_keeps_its_end(carbon: Carbon, tmp_path: Path) -> None:
    src = tmp_path / "block.vcf"
    src.write_text(
        "##fileformat=VCFv4.2\n##contig=<ID=20,length=440000>\n"
        '##INFO=<ID=END,Number=1,Type=Integer,Description="End">\n'
        "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n"
        "20\t61900\tblock\tA\t.\t40\tPASS\tEND=61950\n"
    )
    out = tmp_path / "block.vcf.gz"
    write_vcf(out, src, _rows(carbon, src), recipe="window")
    with pysam.VariantFile(str(out)) as vf:
        (rec,) = list(vf)
    assert rec.stop == 61950 and rec.qual == 40 and rec.info[INFO_STATUS] == ("skipped",)
    assert str(rec).split("\t")[4] == "."  # ALT is still '.'


def test_provenance_lines_and_a_stale_rejects_table(carbon: Carbon, tmp_path: Path) -> None:
    out = tmp_path / "out.vcf"
    stale = tmp_path / "out.vcf.rejects.tsv"
    stale.write_text("from an older run\n")
    provenance = {"version": "1.2.3", "command": "hexamer vep --vcf a.vcf\n-o out.vcf"}
    result = write_vcf(out, SLICE_VCF, _rows(carbon, SLICE_VCF), recipe="window", provenance=provenance)
    assert result.rejects is None and not stale.exists()  # it would describe another output
    with pysam.VariantFile(str(out)) as vf:
        lines = [str(r).strip() for r in vf.header.records]
    assert "##hexamer_version=1.2.3" in lines
    assert "##hexamer_command=hexamer vep --vcf a.vcf -o out.vcf" in lines


def test_tables_carry_the_chosen_info_fields(carbon: Carbon, tmp_path: Path) -> None:
    from hexamer.vep import run_vep
    from hexamer.vep.table_output import resolve_info_fields

    hostile = EDGE_VCF.parent / "hostile.vcf"
    fields = {f.id: f for f in resolve_info_fields(hostile, "all")}
    assert fields["AF"].number == "A" and fields["DB"].type == "Flag"
    assert fields["SVTYPE"].type == "String"  # used, not declared
    with pytest.raises(ValueError, match=r"no INFO field NOPE.*AF"):
        resolve_info_fields(hostile, "AF,NOPE")
    out = tmp_path / "labels.parquet"
    run_vep(carbon, hostile, FASTA, out, window=600, info_fields="AF,CLNSIG,DB", on_note=lambda _: None)
    table = pq.read_table(out)
    assert table.column_names[-3:] == ["info_AF", "info_CLNSIG", "info_DB"]
    assert str(table.schema.field("info_AF").type) == "double"
    by_id: dict[str, list[dict]] = {}
    for row in table.to_pylist():
        by_id.setdefault(row["id"], []).append(row)
    assert [r["info_AF"] for r in by_id["multi_symbolic"]] == pytest.approx([0.1, 0.2, 0.3])  # per ALT
    assert by_id["good"][0]["info_CLNSIG"] == "Pathogenic" and by_id["good"][0]["info_DB"] is True
    assert by_id["duplicate"][1]["info_CLNSIG"] == "Benign" and by_id["duplicate"][1]["info_DB"] is False
    assert by_id["bad_pos"][0]["info_AF"] is None  # a line htslib cannot parse has no INFO
    with pytest.raises(ValueError, match="no INFO field"):  # a typo fails before any scoring
        run_vep(carbon, hostile, FASTA, tmp_path / "x.tsv", window=600, info_fields="CLNSIGG")
    assert not (tmp_path / "x.tsv").exists() and not (tmp_path / ".x.tsv.hexamer-resume").exists()


def test_a_record_htslib_will_not_write_becomes_a_stand_in_with_its_alleles(
    carbon: Carbon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "in.vcf"
    src.write_text(SYMBOLIC_VCF.replace("\tA,<INS>,<*>\t.\t", "\tA,<INS>,<*>\t50\t"))
    original = output_mod._try_write

    def refuses_qual_50(out: Any, rec: Any) -> bool:  # stands in for any record htslib refuses
        return False if rec.qual == 50 else original(out, rec)

    monkeypatch.setattr(output_mod, "_try_write", refuses_qual_50)
    out = tmp_path / "out.vcf"
    result = write_vcf(out, src, _rows(carbon, src), recipe="window")
    assert result.n_records == 3 and result.rejects is None
    with pysam.VariantFile(str(out)) as vf:
        mixed = next(r for r in vf if r.id == "mixed")
    assert mixed.qual is None and mixed.alts == ("A", "<INS>", "<*>")  # QUAL/INFO dropped, ALTs kept
    assert mixed.info[INFO_STATUS] == ("ok", "skipped", "skipped")


def test_rescoring_an_output_leaves_none_of_its_old_fields(carbon: Carbon, tmp_path: Path) -> None:
    from hexamer.vep import INFO_REASON

    first = tmp_path / "first.vcf"
    write_vcf(first, EDGE_VCF, _rows(carbon, EDGE_VCF), recipe="window")
    ok_rows = [{**r, "status": "ok", "score": 1.0, "reason": None} for r in _rows(carbon, EDGE_VCF)]
    second = tmp_path / "second.vcf"
    write_vcf(second, first, ok_rows, recipe="next_base")
    with pysam.VariantFile(str(second)) as vf:
        records = list(vf)
    assert len(records) == len(list(read_vcf(EDGE_VCF)))
    assert all(INFO_REASON not in r.info and r.info[INFO_RECIPE] == "next_base" for r in records)
    assert all(set(r.info[INFO_STATUS]) == {"ok"} for r in records)


@pytest.mark.parametrize("suffix", [".vcf.gz", ".tsv", ".parquet", ".jsonl"])
def test_alt_equal_to_ref_is_skipped_in_every_format(carbon: Carbon, tmp_path: Path, suffix: str) -> None:
    """REF = ALT (20:61270 A>A) was scored `ok` 0.0: its two windows are one and the same."""
    from hexamer.vep import run_vep

    out = tmp_path / f"scored{suffix}"
    result = run_vep(carbon, REF_EQUALS_ALT_VCF, FASTA, out, window=600, on_note=lambda _: None)
    assert result.status_counts == {"ok": 4, "skipped": 1}
    assert result.reason_counts == {("skipped", "ALT equals REF"): 1}
    if suffix == ".vcf.gz":
        with pysam.VariantFile(str(out)) as vf:
            last = list(vf)[-1]
        assert last.info[INFO_STATUS] == ("skipped",) and last.info[INFO_SCORE] == (None,)
        assert "ALT%20equals%20REF" in str(last)
        return
    if suffix == ".parquet":
        rows = pq.read_table(out).to_pylist()
    elif suffix == ".jsonl":
        rows = [json.loads(line) for line in out.read_text().splitlines()]
    else:
        with open(out, newline="") as f:
            rows = list(csv.DictReader(f, delimiter="\t"))
    same = rows[-1]
    assert (same["ref"], same["alt"], same["status"]) == ("A", "A", "skipped")
    assert same["reason"].startswith("ALT equals REF") and same["score"] in (None, "")
    assert [r["status"] for r in rows[:-1]] == ["ok"] * 4


def test_an_info_value_that_is_not_utf8_fails_its_row_naming_the_field(
    carbon: Carbon, tmp_path: Path
) -> None:
    """--info-fields NOTE on a Latin-1 'é' used to leave the cell empty and the row as scored."""
    from hexamer.vep import run_vep

    for suffix in (".tsv", ".parquet"):
        out = tmp_path / f"u{suffix}"
        result = run_vep(
            carbon, UNREADABLE_VCF, FASTA, out, window=600, info_fields="NOTE", on_note=lambda _: None
        )
        if suffix == ".parquet":
            rows = pq.read_table(out).to_pylist()
        else:
            with open(out, newline="", encoding="utf-8") as f:
                rows = list(csv.DictReader(f, delimiter="\t"))
        bad = next(r for r in rows if r["id"] == "bad_info")
        assert bad["status"] == "failed" and bad["score"] in (None, "")
        assert bad["reason"] == "malformed VCF line 8: INFO field NOTE holds byte 0xe9, not UTF-8 text"
        assert [r["status"] for r in rows] == ["ok", "failed", "failed", "failed", "failed", "ok"]
        assert result.status_counts == {"ok": 2, "failed": 4}  # the summary counts it as failed
    # without the option the value is never decoded: the record is checked and scored as before
    plain = run_vep(carbon, UNREADABLE_VCF, FASTA, tmp_path / "p.tsv", window=600, on_note=lambda _: None)
    assert plain.status_counts == {"ok": 2, "failed": 3, "ref_mismatch": 1}
