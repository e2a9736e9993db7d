"""Hostile inputs through every output format: no traceback, and every input record accounted for.

``tests/data/vep/hostile.vcf`` (truncated, garbled and short lines, bad POS, IUPAC/N/lower-case
alleles, a REF mismatch, duplicates, multi-ALT records with ``<DEL>``/``*``/``.``, undeclared
tags and contigs, a comment and a blank line in the body, no final newline) is run as it is and
re-encoded: CRLF, gzip, bgzip, BCF, with huge lines, with bytes that are not UTF-8. Empty,
binary and UTF-16 files must fail cleanly, before any output or checkpoint exists.

"Records in" is counted from the bytes, not by our reader: the data lines after ``#CHROM``
that are not blank. "Records out" is the distinct ``record`` values of a table, or the records
of a VCF/BCF (read back with pysam) plus the distinct records of its rejects table.
"""

from __future__ import annotations

import csv
import gzip
import random
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pysam
import pytest

from hexamer import Carbon
from hexamer.testing.cli import run, run_ok
from hexamer.vep import VcfInputError, rejects_path, run_vep, sidecar_dir

from .conftest import DATA, FASTA

HOSTILE = DATA / "hostile.vcf"
csv.field_size_limit(sys.maxsize)  # the huge lines come back in the rejects table
FORMATS = ["vcf", "vcf.gz", "bcf", "parquet", "tsv", "csv", "jsonl"]
SETTINGS = {"recipe": "window", "window": 600, "batch_size": 4}


def _text_inputs(folder: Path) -> dict[str, Path]:
    plain = HOSTILE.read_bytes()
    head, _, body = plain.partition(b"#CHROM")
    huge_info = b"20\t63000\thuge_info\tG\tA\t.\tPASS\tCLNSIG=" + b"x" * 2_000_000
    huge_garbage = bytes(random.Random(3).choice(b"ACGT;=,") for _ in range(1_000_000))
    long_alt = b"20\t63100\tlong_insertion\tC\tC" + b"A" * 50_000 + b"\t.\tPASS\t."
    not_utf8 = b"20\t63200\tcaf\xe9\tA\tG\t.\tPASS\t.\n\xff\xfe20\t63300\tbad_chrom\tA\tG\t.\tPASS\t."
    variants = {
        "plain": plain,
        "crlf": plain.replace(b"\n", b"\r\n"),
        "huge_lines": head
        + b"#CHROM"
        + body
        + b"\n"
        + b"\n".join([huge_info, huge_garbage, long_alt])
        + b"\n",
        "not_utf8": head + b"#CHROM" + body + b"\n" + not_utf8 + b"\n",
        "header_only": head + b"#CHROM" + body.split(b"\n", 1)[0] + b"\n",
    }
    paths = {}
    for name, data in variants.items():
        paths[name] = folder / f"{name}.vcf"
        paths[name].write_bytes(data)
    paths["gzip"] = folder / "gzip.vcf.gz"
    paths["gzip"].write_bytes(gzip.compress(plain))
    paths["bgzip"] = folder / "bgzip.vcf.gz"
    pysam.tabix_compress(str(paths["plain"]), str(paths["bgzip"]))
    paths["bcf"] = _to_bcf(paths["plain"], folder / "converted.bcf")
    return paths


def _to_bcf(vcf: Path, bcf: Path) -> Path:
    """The records htslib can parse and write, as BCF (a BCF cannot hold the others)."""
    old = pysam.set_verbosity(0)
    try:
        with pysam.VariantFile(str(vcf)) as src:
            records = []
            it = iter(src)
            while True:
                try:
                    records.append(next(it))
                except StopIteration:
                    break
                except (OSError, ValueError):
                    continue
            header = src.header.copy()
        with pysam.VariantFile(str(bcf), "wb", header=header) as out:
            for rec in records:
                try:
                    out.write(rec)
                except (OSError, ValueError, TypeError):
                    continue
    finally:
        pysam.set_verbosity(old)
    return bcf


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return _text_inputs(tmp_path_factory.mktemp("hostile"))


def _records_in(path: Path) -> int:
    if path.suffix == ".bcf":
        with pysam.VariantFile(str(path)) as vf:
            return sum(1 for _ in vf)
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    lines = data.split(b"\n")
    start = next(i for i, line in enumerate(lines) if line.startswith(b"#CHROM")) + 1
    return sum(1 for line in lines[start:] if line.strip(b" \r\n"))


def _records_out(path: Path) -> int:
    name = path.name
    if name.endswith((".vcf", ".vcf.gz", ".bcf")):
        with pysam.VariantFile(str(path)) as vf:
            n = sum(1 for _ in vf)
        rejects = Path(rejects_path(path))
        if rejects.exists():
            with open(rejects, newline="", encoding="utf-8") as f:
                n += len({row["record"] for row in csv.DictReader(f, delimiter="\t")})
        return n
    if name.endswith(".parquet"):
        records = pq.read_table(path, columns=["record"])["record"].to_pylist()
    elif name.endswith((".tsv", ".csv")):
        with open(path, newline="", encoding="utf-8") as f:
            delimiter = "\t" if name.endswith(".tsv") else ","
            records = [int(row["record"]) for row in csv.DictReader(f, delimiter=delimiter)]
    else:
        import json

        records = [json.loads(line)["record"] for line in path.read_text(encoding="utf-8").splitlines()]
    assert sorted(set(records)) == list(range(len(set(records))))  # every record index, once
    return len(set(records))


CASES = ["plain", "crlf", "gzip", "bgzip", "bcf", "huge_lines", "not_utf8", "header_only"]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("case", CASES)
def test_every_record_is_accounted_for(
    carbon: Carbon, inputs: dict[str, Path], tmp_path: Path, case: str, fmt: str
) -> None:
    src = inputs[case]
    out = tmp_path / f"out.{fmt}"
    notes: list[str] = []
    result = run_vep(carbon, src, FASTA, out, on_note=notes.append, **SETTINGS)
    n_in = _records_in(src)
    assert n_in > {"header_only": -1, "bcf": 10}.get(case, 20)
    assert _records_out(out) == n_in
    if result.vcf is not None:
        assert result.vcf.n_records + result.vcf.n_rejected == n_in
        if result.vcf.rejects is not None:
            assert any(result.vcf.rejects in note for note in notes)  # named for the user
    assert not sidecar_dir(out).exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temp files


@pytest.mark.parametrize("fmt", ["vcf.gz", "parquet"])
@pytest.mark.parametrize(
    "content",
    [
        b"",
        bytes(random.Random(0).randrange(256) for _ in range(4096)),
        HOSTILE.read_text().encode("utf-16"),
        gzip.compress(HOSTILE.read_bytes())[:-400],
    ],
    ids=["empty", "binary", "utf16", "truncated_gzip"],
)
def test_unreadable_files_fail_cleanly_before_any_output(
    carbon: Carbon, tmp_path: Path, content: bytes, fmt: str
) -> None:
    src = tmp_path / "in.vcf"
    src.write_bytes(content)
    out = tmp_path / f"out.{fmt}"
    with pytest.raises(VcfInputError, match=r"in\.vcf"):
        run_vep(carbon, src, FASTA, out, on_note=lambda _: None, **SETTINGS)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.vcf"]  # no output, no checkpoint


def test_a_truncated_bgzip_file_fails_cleanly(carbon: Carbon, tmp_path: Path) -> None:
    whole = tmp_path / "whole.vcf.gz"
    pysam.tabix_compress(str(HOSTILE), str(whole))
    src = tmp_path / "cut.vcf.gz"
    src.write_bytes(whole.read_bytes()[: whole.stat().st_size * 2 // 3])
    with pytest.raises(VcfInputError, match=r"cut\.vcf\.gz.*truncated"):
        run_vep(carbon, src, FASTA, tmp_path / "out.vcf.gz", on_note=lambda _: None, **SETTINGS)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.vcf.gz", "whole.vcf.gz"]


def test_cli_reports_the_rejects_table_and_exits_cleanly(tiny_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "scored.bcf"
    args = ["vep", "-m", str(tiny_folder), "--vcf", str(HOSTILE), "--fasta", str(FASTA), "--window", "600"]
    result = run_ok([*args, "-o", str(out)])
    assert result.exception is None
    assert Path(rejects_path(out)).exists() and "rejects.tsv" in result.output
    bad = run([*args[:4], "--vcf", str(FASTA), "-o", str(tmp_path / "x.tsv")])
    assert bad.exit_code == 2 and isinstance(bad.exception, SystemExit)


def test_cli_info_fields_reach_the_table(tiny_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "labels.tsv"
    args = ["vep", "-m", str(tiny_folder), "--vcf", str(HOSTILE), "--fasta", str(FASTA), "--window", "600"]
    run_ok([*args, "--info-fields", "AF,CLNSIG", "-o", str(out)])
    with open(out, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    assert next(r for r in rows if r["id"] == "good")["info_CLNSIG"] == "Pathogenic"
    typo = run([*args, "--info-fields", "CLNSIGG", "-o", str(tmp_path / "x.tsv")])
    assert typo.exit_code == 2 and not (tmp_path / "x.tsv").exists()
