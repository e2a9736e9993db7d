"""Writing FASTA and tables: round trips, list columns, streaming, and atomicity."""

from __future__ import annotations

import csv
import gzip
import json
import math
import os
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pysam
import pytest
import torch

from hexamer.io import (
    SequenceRecord,
    TableWriter,
    atomic_path,
    read_sequences,
    table_format,
    write_fasta,
    write_table,
)
from tests.io.helpers import random_records


class Boom(RuntimeError):
    pass


@pytest.fixture
def seqs() -> list[tuple[str, str]]:
    return random_records(99, 15, 250, "s")


@pytest.fixture
def rows() -> list[dict]:
    rng = random.Random(5)
    return [
        {
            "id": f"s{i}",
            "length": 10 + i,
            "score": rng.uniform(-100, 0),
            "logp": [rng.uniform(-5, 0) for _ in range(10 + i)],
        }
        for i in range(8)
    ]


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# --------------------------------------------------------------------------- atomic_path


def test_atomic_path_commits(tmp_path: Path) -> None:
    dest = tmp_path / "out.txt"
    with atomic_path(dest) as tmp:
        assert tmp.parent == tmp_path and tmp != dest
        assert not dest.exists()
        tmp.write_text("done")
    assert dest.read_text() == "done"
    assert leftovers(tmp_path) == ["out.txt"]


def test_atomic_path_error_leaves_existing_file(tmp_path: Path) -> None:
    dest = tmp_path / "out.txt"
    dest.write_text("old")
    with pytest.raises(Boom), atomic_path(dest) as tmp:
        tmp.write_text("half")
        raise Boom
    assert dest.read_text() == "old"
    assert leftovers(tmp_path) == ["out.txt"]


def test_atomic_path_respects_umask(tmp_path: Path) -> None:
    dest = tmp_path / "out.txt"
    with atomic_path(dest) as tmp:
        tmp.write_text("x")
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    assert dest.stat().st_mode == plain.stat().st_mode


# --------------------------------------------------------------------------- FASTA


@pytest.mark.parametrize("name", ["out.fa", "out.fa.gz"])
def test_write_fasta_round_trip(tmp_path: Path, seqs: list[tuple[str, str]], name: str) -> None:
    path = tmp_path / name
    records = [SequenceRecord("first", "ACGU", "an RNA one"), *seqs]
    assert write_fasta(path, records, line_width=50) == len(records)
    back = list(read_sequences(path))
    assert [(r.id, r.sequence) for r in back] == [("first", "ACGU"), *seqs]
    assert back[0].description == "an RNA one"
    if name.endswith(".gz"):
        assert path.read_bytes()[:4] == b"\x1f\x8b\x08\x04"  # BGZF, so it can be indexed
        with gzip.open(path, "rt") as f:
            text = f.read()
        with pysam.FastaFile(str(path)) as fa:  # random access works on the output
            assert fa.fetch(seqs[3][0]) == seqs[3][1]
    else:
        text = path.read_text()
    assert max(len(line) for line in text.splitlines() if not line.startswith(">")) == 50
    assert not [n for n in leftovers(tmp_path) if n.endswith(".tmp")]


def test_write_fasta_line_width(tmp_path: Path) -> None:
    path = tmp_path / "out.fa"
    write_fasta(path, [("a", "ACGTACGTAC"), ("b", "AC"), ("c", "", "empty")], line_width=4)
    assert path.read_text() == ">a\nACGT\nACGT\nAC\n>b\nAC\n>c empty\n"
    write_fasta(path, [("a", "ACGTACGTAC")], line_width=0)
    assert path.read_text() == ">a\nACGTACGTAC\n"


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (("has space", "ACGT"), "record 2: id must be a non-empty string without whitespace"),
        (("", "ACGT"), "record 2: id must be"),
        (("x", "AC\nGT"), r"record 2 \('x'\): sequence holds '\\n' at position 3"),
        (("x", "AC>GT"), "sequence holds '>'"),
        (("x", "ACGT", "two\nlines"), "description must be one line"),
    ],
)
def test_write_fasta_rejects_records_that_would_not_read_back(
    tmp_path: Path, record: tuple[str, ...], message: str
) -> None:
    path = tmp_path / "out.fa"
    with pytest.raises(ValueError, match=message):
        write_fasta(path, [("ok", "ACGT"), record])
    assert leftovers(tmp_path) == []


def test_write_fasta_failing_iterator_keeps_old_file(tmp_path: Path, seqs: list[tuple[str, str]]) -> None:
    path = tmp_path / "out.fa.gz"
    write_fasta(path, seqs)
    before = path.read_bytes()

    def records():
        yield from seqs[:5]
        raise Boom

    with pytest.raises(Boom):
        write_fasta(path, records())
    assert path.read_bytes() == before
    assert leftovers(tmp_path) == ["out.fa.gz"]
    with pytest.raises(TypeError, match="record 1: expected a SequenceRecord"):
        write_fasta(path, ["ACGT"])  # type: ignore[list-item]


# --------------------------------------------------------------------------- tables


def test_table_format() -> None:
    assert table_format("x.parquet") == "parquet"
    assert table_format("x.TSV") == "tsv"
    assert table_format("x.out", "csv") == "csv"
    with pytest.raises(ValueError, match=r"supported extensions: \.parquet, \.tsv, \.csv, \.jsonl"):
        table_format("x.xlsx")
    with pytest.raises(ValueError, match="unknown table format 'xlsx'"):
        table_format("x.csv", "xlsx")


def test_write_table_unknown_extension_leaves_nothing(tmp_path: Path, rows: list[dict]) -> None:
    with pytest.raises(ValueError, match="supported extensions"):
        write_table(tmp_path / "out.xlsx", rows)
    assert leftovers(tmp_path) == []


def test_parquet_round_trip_with_list_columns(tmp_path: Path, rows: list[dict]) -> None:
    path = tmp_path / "out.parquet"
    write_table(path, rows)
    table = pq.read_table(path)
    assert table.column_names == ["id", "length", "score", "logp"]
    assert pa.types.is_list(table.schema.field("logp").type)
    assert table.to_pylist() == rows


def test_parquet_numpy_and_torch_values(tmp_path: Path) -> None:
    path = tmp_path / "out.parquet"
    write_table(
        path,
        [
            {
                "id": "a",
                "np": np.array([0.5, -1.0], dtype=np.float32),
                "t": torch.tensor([1.0, 2.0]),
                "x": np.float64(3),
            },
            {"id": "b", "np": None, "t": torch.tensor([3.0]), "y": 7},
        ],
    )
    table = pq.read_table(path)
    assert table.schema.field("np").type == pa.list_(pa.float32())
    assert table.to_pylist() == [
        {"id": "a", "np": [0.5, -1.0], "t": [1.0, 2.0], "x": 3.0, "y": None},
        {"id": "b", "np": None, "t": [3.0], "x": None, "y": 7},
    ]


@pytest.mark.parametrize(("name", "delimiter"), [("out.tsv", "\t"), ("out.csv", ",")])
def test_delimited_round_trip(tmp_path: Path, rows: list[dict], name: str, delimiter: str) -> None:
    path = tmp_path / name
    rows[0]["note"] = 'has "quotes", commas\tand tabs'
    write_table(path, rows)
    with open(path, newline="") as f:
        back = list(csv.DictReader(f, delimiter=delimiter))
    assert list(back[0]) == ["id", "length", "score", "logp", "note"]  # union of keys, first-seen order
    for row, got in zip(rows, back, strict=True):
        assert got["id"] == row["id"]
        assert int(got["length"]) == row["length"]
        assert float(got["score"]) == row["score"]  # scalars keep full precision
        assert got["logp"] == ",".join(format(x, ".6g") for x in row["logp"])  # 6 significant digits
        assert [float(x) for x in got["logp"].split(",")] == pytest.approx(row["logp"], rel=1e-5)
    assert back[0]["note"] == rows[0]["note"]
    assert back[1]["note"] == ""


def test_delimited_cells() -> None:
    from hexamer.io.writers import _cell

    assert _cell([1, 2, 3]) == "1,2,3"
    assert _cell([0.123456789, -1e-9, 2.0]) == "0.123457,-1e-09,2"
    assert _cell(np.array([0.5, 1.5], dtype=np.float32)) == "0.5,1.5"
    assert _cell([["a"], "b"]) == '[["a"], "b"]'
    assert _cell({"k": 1}) == '{"k": 1}'
    assert _cell(None) == ""
    assert _cell(np.int64(4)) == "4"


def test_jsonl_round_trip(tmp_path: Path, rows: list[dict]) -> None:
    path = tmp_path / "out.jsonl"
    rows[0]["arr"] = np.array([1.5, -math.inf, math.inf, math.nan])
    rows[0]["worst"] = -math.inf
    write_table(path, rows)
    # strict JSON (RFC 8259 has no NaN/Infinity): a reader that refuses Python's extensions
    # (jq, browsers, Go, Rust) must parse every line, so non-finite numbers are null
    back = [json.loads(line, parse_constant=_refuse) for line in path.read_text().splitlines()]
    assert back[0].pop("arr") == [1.5, None, None, None]
    assert back[0].pop("worst") is None
    rows[0].pop("arr")
    rows[0].pop("worst")
    assert back == rows


def _refuse(name: str) -> None:
    raise AssertionError(f"{name} is not JSON")


def test_write_table_from_arrow_table(tmp_path: Path, rows: list[dict]) -> None:
    table = pa.Table.from_pylist(rows)
    write_table(tmp_path / "out.parquet", table)
    assert pq.read_table(tmp_path / "out.parquet").equals(table)
    write_table(tmp_path / "out.tsv", table)
    with open(tmp_path / "out.tsv", newline="") as f:
        assert [r["id"] for r in csv.DictReader(f, delimiter="\t")] == [r["id"] for r in rows]


def test_mixed_column_types_name_the_column(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="column 'v'"):
        write_table(tmp_path / "out.parquet", [{"v": 1}, {"v": "text"}])
    assert leftovers(tmp_path) == []


def test_empty_tables(tmp_path: Path) -> None:
    write_table(tmp_path / "e.parquet", [])
    assert pq.read_table(tmp_path / "e.parquet").num_rows == 0
    write_table(tmp_path / "e.tsv", [])
    assert (tmp_path / "e.tsv").read_text() == ""
    schema = pa.schema([("id", pa.string()), ("score", pa.float64())])
    with TableWriter(tmp_path / "h.tsv", schema=schema):
        pass
    assert (tmp_path / "h.tsv").read_text() == "id\tscore\n"
    with TableWriter(tmp_path / "h.parquet", schema=schema):
        pass
    assert pq.read_schema(tmp_path / "h.parquet").names == ["id", "score"]


# --------------------------------------------------------------------------- streaming


@pytest.mark.parametrize("name", ["out.parquet", "out.tsv", "out.csv", "out.jsonl"])
def test_table_writer_streams(tmp_path: Path, rows: list[dict], name: str) -> None:
    path = tmp_path / name
    with TableWriter(path) as writer:
        for i in range(0, len(rows), 3):
            writer.write_batch(rows[i : i + 3])
            assert not path.exists()  # nothing visible until the commit
        writer.write_batch([])
    assert writer.rows_written == len(rows)
    assert leftovers(tmp_path) == [name]
    if name.endswith(".parquet"):
        assert pq.ParquetFile(path).metadata.num_row_groups == 3
        assert pq.read_table(path).to_pylist() == rows
    elif name.endswith(".jsonl"):
        assert [json.loads(line) for line in path.read_text().splitlines()] == rows
    else:
        with open(path, newline="") as f:
            back = list(csv.DictReader(f, delimiter="\t" if name.endswith(".tsv") else ","))
        assert [r["id"] for r in back] == [r["id"] for r in rows]


def test_table_writer_columns_fixed_by_first_batch(tmp_path: Path) -> None:
    with TableWriter(tmp_path / "out.tsv") as writer:
        writer.write_batch([{"id": "a", "x": 1}])
        with pytest.raises(ValueError, match=r"row 2: column\(s\) \['y'\] are not in"):
            writer.write_batch([{"id": "b"}, {"id": "c", "y": 2}])
        writer.write_batch([{"x": 3, "id": "d"}])  # missing columns are empty; order follows the header
    assert (tmp_path / "out.tsv").read_text() == "id\tx\na\t1\nd\t3\n"  # the bad batch left no rows


def test_table_writer_parquet_schema_checks(tmp_path: Path) -> None:
    path = tmp_path / "out.parquet"
    with TableWriter(path) as writer:
        writer.write_batch([{"id": "a", "n": 1}])
        with pytest.raises(ValueError, match="column 'n': values do not fit type int64"):
            writer.write_batch([{"id": "b", "n": 1.5}])  # would be silently truncated by pyarrow
        writer.write_batch([{"id": "c", "n": 2.0}, {"id": "d"}])
    assert pq.read_table(path).to_pylist() == [
        {"id": "a", "n": 1},
        {"id": "c", "n": 2},
        {"id": "d", "n": None},
    ]
    schema = pa.schema([("id", pa.string()), ("n", pa.float64())])
    with TableWriter(path, schema=schema) as writer:
        writer.write_batch([{"id": "a", "n": 1}])
        writer.write_batch([{"id": "b", "n": 1.5}])
    assert pq.read_table(path).column("n").to_pylist() == [1.0, 1.5]


@pytest.mark.parametrize("name", ["out.parquet", "out.tsv", "out.csv", "out.jsonl"])
def test_table_writer_exception_leaves_nothing(tmp_path: Path, rows: list[dict], name: str) -> None:
    path = tmp_path / name
    with pytest.raises(Boom), TableWriter(path) as writer:
        writer.write_batch(rows)
        raise Boom
    assert leftovers(tmp_path) == []
    path.write_text("previous result")
    with pytest.raises(Boom), TableWriter(path) as writer:
        writer.write_batch(rows)
        raise Boom
    assert path.read_text() == "previous result"
    assert leftovers(tmp_path) == [name]


def test_table_writer_close_and_abort(tmp_path: Path, rows: list[dict]) -> None:
    writer = TableWriter(tmp_path / "a.jsonl")
    writer.write_batch(rows)
    writer.close()
    writer.close()  # idempotent
    with pytest.raises(ValueError, match="is closed"):
        writer.write_batch(rows)
    dropped = TableWriter(tmp_path / "b.parquet")
    dropped.write_batch(rows)
    dropped.abort()
    forgotten = TableWriter(tmp_path / "c.tsv")
    forgotten.write_batch(rows)
    with pytest.warns(ResourceWarning, match="was never closed"):
        del forgotten  # never committed, and its temp file goes with the object
    assert leftovers(tmp_path) == ["a.jsonl"]


def test_temp_files_are_hidden_beside_destination(tmp_path: Path) -> None:
    with TableWriter(tmp_path / "out.csv") as writer:
        (tmp_name,) = os.listdir(tmp_path)
        assert tmp_name.startswith(".out.csv.") and tmp_name.endswith(".tmp")
        writer.write_batch([{"a": 1}])


def test_deferred_table_writer_publishes_only_on_commit(tmp_path: Path) -> None:
    path = tmp_path / "t.tsv"
    path.write_text("old\n")
    writer = TableWriter(path, deferred=True)
    writer.write_batch([{"a": 1}])
    writer.close()
    assert path.read_text() == "old\n"  # complete, not yet published
    writer.commit()
    assert path.read_text() == "a\n1\n"
    other = TableWriter(path, deferred=True)
    other.write_batch([{"a": 2}])
    other.close()
    other.abort()  # e.g. the VCF it goes with failed
    assert path.read_text() == "a\n1\n" and sorted(p.name for p in tmp_path.iterdir()) == ["t.tsv"]
