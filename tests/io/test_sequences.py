"""Reading sequences: every format, every bad-record rule, every malformed-file error."""

from __future__ import annotations

import csv
import gzip
import io
import pickle
import random
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pysam
import pytest

from hexamer.io import (
    BadRecord,
    SequenceInputError,
    SequenceRecord,
    count_non_acgt,
    normalize_sequence,
    read_sequences,
    sequence_format,
)
from tests.io.helpers import random_dna, random_records


@pytest.fixture
def seqs() -> list[tuple[str, str]]:
    return random_records(1234, 20, 300, "seq")


def fasta_text(records: list[tuple[str, str]], width: int = 60, desc: str = "") -> str:
    out = []
    for ident, seq in records:
        out.append(f">{ident} {desc}".rstrip())
        out.extend(seq[i : i + width] for i in range(0, len(seq), width))
    return "\n".join(out) + "\n"


def good(items: list[SequenceRecord | BadRecord]) -> list[tuple[str, str]]:
    return [(r.id, r.sequence) for r in items if isinstance(r, SequenceRecord)]


def bad(items: list[SequenceRecord | BadRecord]) -> list[BadRecord]:
    return [r for r in items if isinstance(r, BadRecord)]


# --------------------------------------------------------------------------- formats


def test_fasta_multiline_with_description(tmp_path: Path, seqs: list[tuple[str, str]]) -> None:
    path = tmp_path / "in.fa"
    path.write_text(fasta_text(seqs, width=17, desc="some description here"))
    items = list(read_sequences(path))
    assert good(items) == seqs
    assert [r.index for r in items] == list(range(len(seqs)))
    assert all(r.description == "some description here" for r in items)


def test_fasta_keeps_case_and_u_and_drops_inner_whitespace(tmp_path: Path) -> None:
    path = tmp_path / "in.fasta"
    path.write_text(">a\nacgU\r\nAC GT\tN\n\n>b\nNNNN\n")
    assert good(list(read_sequences(path))) == [("a", "acgUACGTN"), ("b", "NNNN")]


def test_fasta_gzip(tmp_path: Path, seqs: list[tuple[str, str]]) -> None:
    path = tmp_path / "in.fa.gz"
    with gzip.open(path, "wt") as f:
        f.write(fasta_text(seqs))
    assert good(list(read_sequences(path))) == seqs


def test_fasta_bgzip(tmp_path: Path, seqs: list[tuple[str, str]]) -> None:
    plain = tmp_path / "plain.fa"
    plain.write_text(fasta_text(seqs))
    path = tmp_path / "in.fa.bgz"
    pysam.tabix_compress(str(plain), str(path))
    assert path.read_bytes()[:4] == b"\x1f\x8b\x08\x04"  # BGZF: gzip with the extra field
    assert good(list(read_sequences(path))) == seqs


def test_fastq(tmp_path: Path, seqs: list[tuple[str, str]]) -> None:
    path = tmp_path / "reads.fq"
    path.write_text("".join(f"@{i} run=1\n{s}\n+\n{'I' * len(s)}\n" for i, s in seqs))
    items = list(read_sequences(path))
    assert good(items) == seqs
    assert items[0].description == "run=1"


def test_txt_one_per_line(tmp_path: Path, seqs: list[tuple[str, str]]) -> None:
    path = tmp_path / "in.txt"
    path.write_text("\n".join(s for _, s in seqs[:3]) + "\n\n" + seqs[3][1] + "\n")
    items = list(read_sequences(path))
    assert [r.sequence for r in items] == [s for _, s in seqs[:4]]
    assert [r.id for r in items] == ["line1", "line2", "line3", "line5"]  # blank line 4 skipped


def test_txt_gzip(tmp_path: Path, seqs: list[tuple[str, str]]) -> None:
    path = tmp_path / "in.txt.gz"
    with gzip.open(path, "wt") as f:
        f.write("\n".join(s for _, s in seqs))
    assert [r.sequence for r in read_sequences(path)] == [s for _, s in seqs]


def test_tsv_and_csv_tables(tmp_path: Path, seqs: list[tuple[str, str]]) -> None:
    for name, delimiter in (("in.tsv", "\t"), ("in.csv", ",")):
        path = tmp_path / name
        with open(path, "w", newline="") as f:
            writer = csv.writer(f, delimiter=delimiter)
            writer.writerow(["sequence", "other", "id", "description"])
            writer.writerows([s, "x", i, f"d {i}"] for i, s in seqs)
        items = list(read_sequences(path))
        assert good(items) == seqs
        assert items[1].description == "d seq1"


def test_table_with_long_sequence(tmp_path: Path) -> None:
    long = random_dna(random.Random(7), 300_000)  # beyond csv's default 128 KiB field limit
    path = tmp_path / "in.tsv"
    path.write_text(f"id\tsequence\nbig\t{long}\n")
    assert good(list(read_sequences(path))) == [("big", long)]


def test_parquet_table(tmp_path: Path, seqs: list[tuple[str, str]]) -> None:
    path = tmp_path / "in.parquet"
    pq.write_table(
        pa.table({"id": [i for i, _ in seqs], "sequence": [s for _, s in seqs], "x": [1] * 20}), path
    )
    assert good(list(read_sequences(path))) == seqs


def test_parquet_integer_ids_and_nulls(tmp_path: Path) -> None:
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": [1, 2, None], "sequence": ["ACGT", None, "GG"]}), path)
    items = list(read_sequences(path))
    assert good(items) == [("1", "ACGT")]
    assert [(b.index, b.id, b.reason) for b in bad(items)] == [
        (1, "2", "empty sequence"),
        (2, "", "missing id"),
    ]


@pytest.mark.parametrize("name", ["in.tsv", "in.csv", "in.parquet"])
def test_missing_columns_message(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    if name.endswith(".parquet"):
        pq.write_table(pa.table({"name": ["a"], "seq": ["ACGT"]}), path)
    else:
        sep = "\t" if name.endswith(".tsv") else ","
        path.write_text(f"name{sep}seq\na{sep}ACGT\n")
    with pytest.raises(SequenceInputError) as err:
        read_sequences(path)
    msg = str(err.value)
    assert str(path) in msg
    assert "'id'" in msg and "'sequence'" in msg  # expected
    assert "'name'" in msg and "'seq'" in msg  # found


def test_parquet_sequence_column_must_be_text(tmp_path: Path) -> None:
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": ["a"], "sequence": [12]}), path)
    with pytest.raises(SequenceInputError, match="'sequence' must hold text"):
        read_sequences(path)


def test_format_from_name_and_override(tmp_path: Path) -> None:
    assert sequence_format("x.fa.gz") == "fasta"
    assert sequence_format("x.unknown") == "fasta"
    assert sequence_format("X.TSV.GZ") == "tsv"
    assert sequence_format("x.pq") == "parquet"
    path = tmp_path / "data.seqs"
    path.write_text("ACGT\nGGCC\n")
    assert [r.sequence for r in read_sequences(path, format="txt")] == ["ACGT", "GGCC"]
    with pytest.raises(ValueError, match="unknown sequence format"):
        read_sequences(path, format="bam")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="on_error"):
        read_sequences(path, on_error="skip")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- stdin


def test_stdin_fasta(monkeypatch: pytest.MonkeyPatch, seqs: list[tuple[str, str]]) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(fasta_text(seqs)))
    assert good(list(read_sequences("-"))) == seqs


def test_stdin_binary_buffer_and_format(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = io.TextIOWrapper(io.BytesIO(b"ACGT\nTTTT\n"), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", stream)
    assert [r.sequence for r in read_sequences("-", format="txt")] == ["ACGT", "TTTT"]


def test_stdin_malformed_names_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("ACGT\n"))
    with pytest.raises(SequenceInputError, match=r"^<stdin>: line 1: expected a FASTA"):
        read_sequences("-")


# --------------------------------------------------------------------------- bad records


def test_bad_records_reported_and_others_kept(tmp_path: Path, seqs: list[tuple[str, str]]) -> None:
    records = [*seqs[:3], ("empty", ""), (seqs[0][0], "ACGT"), ("iupac", "ACGTRYKMSWBDHVNU"), *seqs[3:]]
    records.insert(5, ("badchar", "ACGTAXC"))
    path = tmp_path / "in.fa"
    path.write_text(fasta_text(records))
    items = list(read_sequences(path))
    assert len(items) == len(records)
    assert [r.index for r in items] == list(range(len(records)))
    assert good(items) == [*seqs[:3], ("iupac", "ACGTRYKMSWBDHVNU"), *seqs[3:]]
    reports = bad(items)
    assert [(b.index, b.id) for b in reports] == [(3, "empty"), (4, "seq0"), (5, "badchar")]
    assert reports[0].reason == "empty sequence"
    assert reports[1].reason == "duplicate id 'seq0' (first seen in record 1)"
    assert reports[2].reason.startswith("invalid character 'X' at position 6")
    assert str(reports[2]).startswith("record 6 ('badchar'): invalid character 'X'")


def test_invalid_char_position_counts_bases_across_lines(tmp_path: Path) -> None:
    path = tmp_path / "in.fa"
    path.write_text(">a\nACGTA\nCG-TA\n")
    (report,) = read_sequences(path)
    assert isinstance(report, BadRecord)
    assert report.reason.startswith("invalid character '-' at position 8")


def test_duplicate_of_a_bad_record_is_still_a_duplicate(tmp_path: Path) -> None:
    path = tmp_path / "in.tsv"
    path.write_text("id\tsequence\na\t\na\tACGT\nb\tAC\tEXTRA\nc\tGG\n")
    items = list(read_sequences(path))
    assert [type(r).__name__ for r in items] == ["BadRecord", "BadRecord", "BadRecord", "SequenceRecord"]
    assert items[1].reason.startswith("duplicate id 'a'")
    assert items[2].reason == "row has 3 fields, the header has 2"
    assert good(items) == [("c", "GG")]


def test_on_error_raise(tmp_path: Path, seqs: list[tuple[str, str]]) -> None:
    path = tmp_path / "in.fa"
    path.write_text(fasta_text([*seqs[:2], ("x", "ACGTZ"), *seqs[2:]]))
    it = read_sequences(path, on_error="raise")
    assert good([next(it), next(it)]) == seqs[:2]
    with pytest.raises(SequenceInputError) as err:
        next(it)
    assert err.value.record == 3
    assert str(err.value) == (
        f"{path}: record 3: id 'x': invalid character 'Z' at position 5 "
        "(allowed: IUPAC nucleotide codes ACGTUNRYKMSWBDHV, either case)"
    )


def test_on_error_raise_gives_line_for_text_inputs(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_text("ACGT\n\nAC!T\n")
    with pytest.raises(SequenceInputError, match=r"line 3: record 2: id 'line3': invalid character '!'"):
        list(read_sequences(path, on_error="raise"))


# --------------------------------------------------------------------------- malformed files


def test_missing_file_raises_at_call(tmp_path: Path) -> None:
    path = tmp_path / "nope.fa"
    with pytest.raises(SequenceInputError, match="no such file") as err:
        read_sequences(path)  # no iteration needed
    assert err.value.path == str(path)
    with pytest.raises(SequenceInputError, match="is a directory"):
        read_sequences(tmp_path)


def test_fasta_not_starting_with_header(tmp_path: Path) -> None:
    path = tmp_path / "in.fa"
    path.write_text("\n\nACGTACGT\n>a\nACGT\n")
    with pytest.raises(
        SequenceInputError, match=r"line 3: expected a FASTA \('>'\) or FASTQ \('@'\) header"
    ) as err:
        read_sequences(path)
    assert err.value.line == 3


def test_binary_garbage(tmp_path: Path) -> None:
    rng = random.Random(3)
    path = tmp_path / "in.fa"
    path.write_bytes(b">a\nACGT\n" + bytes(rng.randrange(256) for _ in range(4096)))
    with pytest.raises(SequenceInputError, match=r"binary data|not UTF-8"):
        read_sequences(path)
    nul = tmp_path / "nul.fa"
    nul.write_bytes(b">a\nAC\x00GT\n")  # pysam would silently cut the sequence at the NUL
    with pytest.raises(SequenceInputError, match="line 2: binary data"):
        read_sequences(nul)
    txt = tmp_path / "in.txt"
    txt.write_bytes(b"ACGT\n\xff\xfe\n")
    with pytest.raises(SequenceInputError, match="line 2: not UTF-8"):
        list(read_sequences(txt))


def test_bad_bytes_past_the_sniffed_head(tmp_path: Path) -> None:
    """Past the first 64 KiB: a NUL byte (pysam would cut the record there without a word) is
    still refused with its line; a byte that is not UTF-8 is one bad record, the rest are read."""
    rng = random.Random(5)
    good = b"".join(b">s%d\n%s\n" % (i, "".join(rng.choices("ACGT", k=60)).encode()) for i in range(2000))
    nul = tmp_path / "nul.fa.gz"
    nul.write_bytes(gzip.compress(good + b">bad\nACGT\x00ACGT\n>after\nACGT\n"))
    with pytest.raises(SequenceInputError, match="line 4002: binary data") as err:
        read_sequences(nul)
    assert err.value.line == 4002
    latin1 = tmp_path / "latin1.fa"
    latin1.write_bytes(good + b">bad\nAC\xffGT\n>after\nACGT\n")
    records = list(read_sequences(latin1))
    assert len(records) == 2002
    assert (
        isinstance(records[2000], BadRecord)
        and "after 's1999': not UTF-8 text (byte 0xff)" in records[2000].reason
    )
    assert isinstance(records[2001], SequenceRecord) and records[2001].id == "after"


def test_txt_that_is_fasta(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_text(">a\nACGT\n")
    with pytest.raises(SequenceInputError, match="looks like FASTA"):
        list(read_sequences(path))


def test_truncated_fastq(tmp_path: Path) -> None:
    """The file ends inside the last record's quality: one bad record, like any other."""
    path = tmp_path / "in.fq"
    for cut in ("+\nII\n", "+\n"):
        path.write_text("@a\nACGT\n+\nIIII\n@b\nACGT\n" + cut)
        records = list(read_sequences(path))
        assert isinstance(records[0], SequenceRecord) and records[0].id == "a"
        assert isinstance(records[1], BadRecord) and len(records) == 2
        assert (
            records[1].reason == "truncated FASTQ record: the file ends inside its quality line (after 'a')"
        )
        with pytest.raises(SequenceInputError, match=r"record 2: .*truncated FASTQ record"):
            list(read_sequences(path, on_error="raise"))


def test_corrupt_gzip(tmp_path: Path) -> None:
    path = tmp_path / "in.fa.gz"
    path.write_bytes(b"\x1f\x8b" + b"not really gzip" * 10)
    with pytest.raises(SequenceInputError, match="corrupt or truncated gzip"):
        read_sequences(path)


def test_not_parquet(tmp_path: Path) -> None:
    path = tmp_path / "in.parquet"
    path.write_text("id,sequence\na,ACGT\n")
    with pytest.raises(SequenceInputError, match="not a readable Parquet file"):
        read_sequences(path)


def test_empty_inputs(tmp_path: Path) -> None:
    (tmp_path / "e.fa").write_text("")
    assert list(read_sequences(tmp_path / "e.fa")) == []
    (tmp_path / "e.tsv").write_text("")
    with pytest.raises(SequenceInputError, match="missing column"):
        read_sequences(tmp_path / "e.tsv")


def test_error_is_picklable() -> None:
    err = SequenceInputError("x.fa", "boom", line=3, record=2)
    copy = pickle.loads(pickle.dumps(err))
    assert (str(copy), copy.line, copy.record) == (str(err), 3, 2)


# --------------------------------------------------------------------------- helpers


def test_normalize_and_count() -> None:
    assert normalize_sequence(" acgu\nUUN \t") == "acgtTTN"
    assert normalize_sequence("ACGU", rna_to_dna=False) == "ACGU"
    assert count_non_acgt("ACGTacgtNnRU-") == 5
    assert count_non_acgt(normalize_sequence("ACGU")) == 0
    assert count_non_acgt("") == 0


def test_reverse_complement_follows_the_iupac_table_and_keeps_case() -> None:
    from hexamer.io import IUPAC_CODES, reverse_complement

    # the IUPAC complement table (NC-IUB 1984): each code and its complement
    pairs = {"A": "T", "C": "G", "R": "Y", "K": "M", "B": "V", "D": "H", "N": "N", "S": "S", "W": "W"}
    table = {**pairs, **{v: k for k, v in pairs.items()}}
    for code in IUPAC_CODES.replace("U", ""):
        assert reverse_complement(code) == table[code]
        assert reverse_complement(code.lower()) == table[code].lower()
    assert reverse_complement("AACGTNacgtn") == "nacgtNACGTT"
    assert reverse_complement("A-C.U") == "U.G-T"  # other characters stay, in reversed order
    seq = "ACGTRYKMBVDHNSWacgtrykmbvdhnsw"
    assert reverse_complement(reverse_complement(seq)) == seq


def test_reverse_complement_is_the_one_the_pipelines_use() -> None:
    from hexamer.io import reverse_complement
    from hexamer.train import data

    assert data.reverse_complement is reverse_complement


IO_DATA = Path(__file__).resolve().parent.parent / "data" / "io"


def test_a_fasta_whose_only_header_is_bare_is_refused_when_opened(tmp_path: Path) -> None:
    with pytest.raises(SequenceInputError, match=r"line 1: the only FASTA header is a bare '>'"):
        read_sequences(IO_DATA / "bare_header.fa")
    for text in ("> description only\nACGT\n", "\n\n>\r\nACGT\r\n"):
        (tmp_path / "x.fa").write_text(text)
        with pytest.raises(SequenceInputError, match="bare '>'"):
            read_sequences(tmp_path / "x.fa")
    big = tmp_path / "big.fa.gz"  # past the sniffed head: the whole-file pass tells
    big.write_bytes(gzip.compress(b">\n" + b"ACGT" * 40_000 + b"\n"))
    with pytest.raises(SequenceInputError, match="bare '>'"):
        read_sequences(big)
    # a bare header among named ones is one bad record, the others are read
    for body in (b">\nACGT\n>b\nACGT\n", b">\n" + b"ACGT\n" * 40_000 + b">b\nAC\n"):
        (tmp_path / "y.fa").write_bytes(body)
        records = list(read_sequences(tmp_path / "y.fa"))
        assert isinstance(records[0], BadRecord) and records[0].reason == "missing id"
        assert isinstance(records[1], SequenceRecord) and records[1].id == "b"


def test_a_fastq_record_without_its_quality_lines_is_a_bad_record() -> None:
    records = list(read_sequences(IO_DATA / "truncated_last_record.fq"))
    assert [r.id for r in records] == ["r1", "r2", "r3"]
    assert all(isinstance(r, SequenceRecord) for r in records[:2])
    bad = records[2]
    assert isinstance(bad, BadRecord) and bad.reason.startswith("truncated FASTQ record")
    with pytest.raises(SequenceInputError, match=r"record 3: id 'r3': truncated FASTQ record"):
        list(read_sequences(IO_DATA / "truncated_last_record.fq", on_error="raise"))
