"""Raw inputs: table reading, FASTA (stdin too), BED; errors name the file and row."""

from __future__ import annotations

import io
import pickle
import sys
from pathlib import Path

import pytest

from hexamer.finetune.inputs import DataError, read_bed, read_fasta, read_rows, table_input_format


def test_table_errors_name_file_and_row(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no such file"):
        read_rows(str(tmp_path / "absent.tsv"))
    ragged = tmp_path / "r.tsv"
    ragged.write_text("id\tsequence\ty\na\tACGT\t1\n\nb\tACGT\n")
    with pytest.raises(DataError, match=r"r.tsv: row 2: 2 fields, the header has 3"):
        read_rows(str(ragged))
    dup = tmp_path / "d.csv"
    dup.write_text("id,y,y\na,1,2\n")
    with pytest.raises(DataError, match="repeats column"):
        read_rows(str(dup))
    with pytest.raises(DataError, match="cannot tell the table format"):
        table_input_format(tmp_path / "x.xlsx")
    assert table_input_format("x.tsv.gz") == "tsv" and table_input_format("-") == "tsv"


def test_table_cells_are_kept_as_written(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text('id,sequence,y\n007,"ACGT",NA\n')
    t = read_rows(str(path))
    assert t.data == {"id": ["007"], "sequence": ["ACGT"], "y": ["NA"]} and len(t) == 1


def test_fasta_from_stdin_and_bad_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(">a\nACGT\n>b\nGGNN\n"))
    assert read_fasta("-") == (["a", "b"], ["ACGT", "GGNN"])
    bad = tmp_path / "b.fa"
    bad.write_text(">a\nACGT\n>b\nAC-GT\n")
    with pytest.raises(DataError, match=r"b.fa: row 2: .*invalid character '-'"):
        read_fasta(str(bad))


def test_bed_checks(tmp_path: Path) -> None:
    bed = tmp_path / "r.bed"
    bed.write_text("#c\n20\t5\t10\n20\t10\t20\tx\t0\t-\n")
    regions = read_bed(str(bed))
    assert regions[0].name == "20:5-10" and regions[1].strand == "-"
    bed.write_text("20\t10\t5\tx\n")
    with pytest.raises(DataError, match=r"row 1 \(id 'x'\): need 0 <= start < end"):
        read_bed(str(bed))
    bed.write_text("20\t1\t5\tx\n20\t6\t9\tx\n")
    with pytest.raises(DataError, match=r"row 2 \(id 'x'\): name repeats row 1"):
        read_bed(str(bed))


def test_data_error_pickles_with_its_parts() -> None:
    err = DataError("f.tsv", "label is NaN", row=3, id="x", column="y")
    again = pickle.loads(pickle.dumps(err))
    assert str(again) == str(err) == "f.tsv: row 3 (id 'x'): column 'y': label is NaN"
    assert (again.row, again.column) == (3, "y")
