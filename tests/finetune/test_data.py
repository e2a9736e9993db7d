"""Reading labelled sequences: tables, FASTA + labels, BED + reference; every error names file,
row and column, before any model is loaded. Sequences are real human DNA from the shipped slices."""

from __future__ import annotations

import gzip
import io
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pysam
import pytest

from hexamer.finetune.data import ReadOptions, check_lengths, load_bed, load_fasta, load_table, normalize_dna
from hexamer.finetune.inputs import DataError
from hexamer.io import reverse_complement

ROOT = Path(__file__).resolve().parents[2]
HUMAN = ROOT / "hexamer" / "data" / "dna" / "human_chr20.fa.gz"
REF = ROOT / "tests" / "data" / "vep" / "chr20_slice.fa.gz"  # contig "20", bgzipped + indexed


@pytest.fixture(scope="module")
def dna() -> list[str]:
    with pysam.FastxFile(str(HUMAN)) as fx:
        seq = next(iter(fx)).sequence
    return [seq[i * 150 : i * 150 + 120] for i in range(40)]


def _write(path: Path, header: list[str], rows: list[list[object]], sep: str = "\t") -> Path:
    lines = [sep.join(header)] + [sep.join(str(v) for v in r) for r in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def _reg(**kw: object) -> ReadOptions:
    return ReadOptions(task="regression", label_columns=kw.pop("labels", ("K562", "HepG2")), **kw)  # type: ignore[arg-type]


def test_table_regression_reads_ids_chroms_labels(tmp_path: Path, dna: list[str]) -> None:
    rows = [[f"s{i}", f"chr{i % 5 + 1}", dna[i], i * 0.5, -i] for i in range(20)]
    path = _write(tmp_path / "t.tsv", ["id", "chrom", "sequence", "K562", "HepG2"], rows)
    res = load_table(str(path), _reg())
    assert res.task.kind == "regression" and res.task.label_columns == ("K562", "HepG2")
    assert res.data.ids[:2] == ("s0", "s1") and res.data.chroms[0] == "chr1"
    assert res.data.labels.dtype == np.float32 and res.data.labels[3].tolist() == [1.5, -3.0]
    assert res.data.sequences[5] == dna[5] and res.rows_with_n == 0


def test_normalisation_upper_u_iupac_to_n_and_counted(tmp_path: Path, dna: list[str]) -> None:
    assert normalize_dna("acgu ryk\nN") == "ACGTNNNN"
    with pytest.raises(ValueError, match=r"'X' at position 3"):
        normalize_dna("ACXT")
    rows = [["a", dna[0].lower(), 1, 2], ["b", "ACGTRACGT", 2, 3], ["c", "ACGTNNACG", 3, 1]]
    res = load_table(str(_write(tmp_path / "t.tsv", ["id", "sequence", "K562", "HepG2"], rows)), _reg())
    assert res.data.sequences == (dna[0].upper(), "ACGTNACGT", "ACGTNNACG")
    assert res.rows_with_n == 2 and "2 of 3 rows hold N" in res.notes[0]


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        ("nan", "label is NaN"),
        ("inf", "label is infinite"),
        ("high", "label 'high' is not a number"),
        ("", "missing label"),
    ],
)
def test_bad_label_names_file_row_id_column(tmp_path: Path, dna: list[str], cell: str, expected: str) -> None:
    rows = [["a", dna[0], 1, 2], ["b", dna[1], cell, 3]]
    path = _write(tmp_path / "bad.tsv", ["id", "sequence", "K562", "HepG2"], rows)
    with pytest.raises(DataError) as err:
        load_table(str(path), _reg())
    assert str(err.value) == f"{path}: row 2 (id 'b'): column 'K562': {expected}"


def test_missing_columns_duplicate_ids_empty_and_invalid_sequences(tmp_path: Path, dna: list[str]) -> None:
    path = _write(tmp_path / "t.tsv", ["id", "sequence", "K562"], [["a", dna[0], 1]])
    with pytest.raises(DataError, match=r"no label column 'HepG2'; the columns are 'id', 'sequence', 'K562'"):
        load_table(str(path), _reg())
    with pytest.raises(DataError, match="no sequence column 'seq'"):
        load_table(str(path), _reg(labels=("K562",), sequence_column="seq"))
    dup = _write(tmp_path / "d.tsv", ["id", "sequence", "y"], [["a", dna[0], 1], ["a", dna[1], 2]])
    with pytest.raises(DataError, match=r"row 2 \(id 'a'\): duplicate id \(first in row 1\)"):
        load_table(str(dup), _reg(labels=("y",)))
    empty = _write(tmp_path / "e.tsv", ["id", "sequence", "y"], [["a", dna[0], 1], ["b", "", 2]])
    with pytest.raises(DataError, match=r"row 2 \(id 'b'\): column 'sequence': empty sequence"):
        load_table(str(empty), _reg(labels=("y",)))
    bad = _write(tmp_path / "x.tsv", ["id", "sequence", "y"], [["a", "ACGZ", 1], ["b", dna[1], 2]])
    with pytest.raises(DataError, match=r"row 1 \(id 'a'\): column 'sequence': character 'Z' at position 4"):
        load_table(str(bad), _reg(labels=("y",)))


def test_classification_string_classes_sorted_and_fixed_for_valid(tmp_path: Path, dna: list[str]) -> None:
    names = ["promoter", "enhancer", "silencer"]
    rows = [[f"r{i}", dna[i], names[i % 3]] for i in range(12)]
    path = _write(tmp_path / "c.csv", ["id", "sequence", "class"], rows, sep=",")
    opts = ReadOptions(task="classification", label_columns=("class",))
    res = load_table(str(path), opts)
    assert res.task.kind == "multiclass" and res.task.class_names == ("enhancer", "promoter", "silencer")
    assert res.data.labels.dtype == np.int64 and res.data.labels[:3].tolist() == [1, 0, 2]
    valid = _write(tmp_path / "v.csv", ["id", "sequence", "class"], [["v1", dna[0], "insulator"]], sep=",")
    fixed = ReadOptions(task="classification", label_columns=("class",), class_names=res.task.class_names)
    with pytest.raises(DataError, match=r"row 1 \(id 'v1'\): column 'class': class 'insulator' is not among"):
        load_table(str(valid), fixed)
    one = _write(
        tmp_path / "o.csv", ["id", "sequence", "class"], [["a", dna[0], "x"], ["b", dna[1], "x"]], sep=","
    )
    with pytest.raises(DataError, match=r"column 'class': one class only \('x'\)"):
        load_table(str(one), opts)


def test_binary_numeric_and_multilabel(tmp_path: Path, dna: list[str]) -> None:
    rows = [[f"r{i}", dna[i], i % 2, (i // 2) % 2, "1.0" if i % 3 else "0"] for i in range(10)]
    path = _write(tmp_path / "b.tsv", ["id", "sequence", "y", "a", "b"], rows)
    res = load_table(str(path), ReadOptions(task="classification", label_columns=("y",)))
    assert res.task.kind == "binary" and res.task.class_names == ("0", "1")
    assert res.data.labels.tolist() == [i % 2 for i in range(10)]
    ml = load_table(str(path), ReadOptions(task="classification", label_columns=("a", "b")))
    assert ml.task.kind == "multilabel" and ml.data.labels.dtype == np.float32
    assert ml.data.labels[:, 1].tolist() == [0.0 if i % 3 == 0 else 1.0 for i in range(10)]


def test_parquet_nan_label_named(tmp_path: Path, dna: list[str]) -> None:
    table = pa.table({"id": ["a", "b", "c"], "sequence": dna[:3], "y": [1.0, 2.0, float("nan")]})
    pq.write_table(table, tmp_path / "t.parquet")
    with pytest.raises(DataError, match=r"row 3 \(id 'c'\): column 'y': label is NaN"):
        load_table(str(tmp_path / "t.parquet"), _reg(labels=("y",)))


def test_parquet_chrom_ints_gzip_csv_and_stdin(
    tmp_path: Path, dna: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    table = pa.table({"id": ["a", "b"], "sequence": dna[:2], "y": [1.0, 2.0], "chrom": [7, 13]})
    pq.write_table(table, tmp_path / "t.parquet")
    res = load_table(str(tmp_path / "t.parquet"), _reg(labels=("y",)))
    assert res.data.chroms == ("7", "13")
    text = "id,sequence,y\na," + dna[0] + ",1\nb," + dna[1] + ",2\n"
    with gzip.open(tmp_path / "t.csv.gz", "wt") as f:
        f.write(text)
    assert load_table(str(tmp_path / "t.csv.gz"), _reg(labels=("y",))).data.ids == ("a", "b")
    monkeypatch.setattr(sys, "stdin", io.StringIO(text.replace(",", "\t")))
    res = load_table("-", _reg(labels=("y",)))
    assert res.source == "<stdin>" and res.data.labels[:, 0].tolist() == [1.0, 2.0]


def test_metric_filter_and_weights(tmp_path: Path, dna: list[str]) -> None:
    rows = [[f"r{i}", dna[i], i, [0.5, 2.0, "nan", 1.0][i], [1, 2, 0, -1][i]] for i in range(4)]
    path = _write(tmp_path / "m.tsv", ["id", "sequence", "y", "lfcSE", "w"], rows)
    res = load_table(str(path), _reg(labels=("y",), metric_filter=("lfcSE<=1",)))
    assert res.data.metric_mask.tolist() == [True, False, False, True]
    with pytest.raises(DataError, match=r"row 4 \(id 'r3'\): column 'w': weight -1.0 is negative"):
        load_table(str(path), _reg(labels=("y",), weight_column="w"))


def test_fasta_joined_to_labels_by_name(tmp_path: Path, dna: list[str]) -> None:
    fa = tmp_path / "s.fa"
    fa.write_text("".join(f">q{i}\n{dna[i]}\n" for i in range(3)))
    labels = _write(tmp_path / "l.tsv", ["id", "y"], [["q2", 3], ["q0", 1], ["q1", 2]])
    res = load_fasta(str(fa), str(labels), _reg(labels=("y",)))
    assert res.data.ids == ("q0", "q1", "q2") and res.data.labels[:, 0].tolist() == [1, 2, 3]
    assert res.data.sequences[1] == dna[1]
    short = _write(tmp_path / "s.tsv", ["id", "y"], [["q0", 1], ["q1", 2]])
    with pytest.raises(DataError, match=r"record 'q2' has no row in"):
        load_fasta(str(fa), str(short), _reg(labels=("y",)))
    extra = _write(tmp_path / "e.tsv", ["id", "y"], [["q0", 1], ["q1", 2], ["q2", 3], ["zz", 4]])
    with pytest.raises(DataError, match=r"row 4 \(id 'zz'\): column 'id': no record of this name"):
        load_fasta(str(fa), str(extra), _reg(labels=("y",)))


def test_bed_regions_strand_aware_from_reference(tmp_path: Path) -> None:
    bed = tmp_path / "r.bed"
    bed.write_text("track name=x\n20\t100000\t100120\tplus\t0\t+\nchr20\t200000\t200120\tminus\t0\t-\n")
    labels = _write(tmp_path / "l.tsv", ["id", "y"], [["plus", 1.0], ["minus", 2.0]])
    res = load_bed(str(bed), str(REF), str(labels), _reg(labels=("y",)))
    with pysam.FastaFile(str(REF)) as fa:
        plus, minus = fa.fetch("20", 100000, 100120).upper(), fa.fetch("20", 200000, 200120).upper()
    assert res.data.sequences == (plus, reverse_complement(minus))
    assert res.data.chroms == ("20", "chr20")
    past = tmp_path / "p.bed"
    past.write_text("20\t439990\t440010\tplus\n")
    with pytest.raises(DataError, match=r"row 1 \(id 'plus'\): region ends at 440010, past the end"):
        load_bed(
            str(past),
            str(REF),
            str(_write(tmp_path / "p.tsv", ["id", "y"], [["plus", 1]])),
            _reg(labels=("y",)),
        )
    table = _write(
        tmp_path / "reg.tsv",
        ["id", "chrom", "start", "end", "strand", "y"],
        [["m", "20", 200000, 200120, "-", 1]],
    )
    assert load_table(str(table), _reg(labels=("y",)), reference=str(REF)).data.sequences == (
        reverse_complement(minus),
    )


def test_check_lengths_names_the_first_long_row(tmp_path: Path, dna: list[str]) -> None:
    rows = [["a", dna[0][:50], 1], ["b", dna[1], 2], ["c", dna[2], 3]]
    res = load_table(str(_write(tmp_path / "t.tsv", ["id", "sequence", "y"], rows)), _reg(labels=("y",)))
    check_lengths(res.data, 120)
    with pytest.raises(
        DataError, match=r"t.tsv: row 2 \(id 'b'\): sequence of 120 bp .* \(100 bp\); 2 row\(s\)"
    ):
        check_lengths(res.data, 100, source=str(tmp_path / "t.tsv"))
