"""ISM outputs: the bgzip + tabix TSV in CADD layout (queried by region with pysam), and tables."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pyarrow.parquet as pq
import pysam
import pytest

from hexamer.ism import CADD_COLUMNS, ISM_COLUMNS, output_format, write_ism
from hexamer.ism.tables import cadd_comment


def rows() -> list[dict]:
    out = []
    for pos in (100, 101, 102):
        for alt, score in (("A", -1.5), ("C", 0.25), ("T", None)):
            status = "ok" if score is not None else "skipped"
            out.append(
                {
                    "chrom": "20",
                    "pos": pos,
                    "ref": "G",
                    "alt": alt,
                    "kind": "SNV",
                    "recipe": "window",
                    "window_placement": "grid:128",
                    "score": score,
                    "phred": None,
                    "status": status,
                    "reason": None if score is not None else "why",
                    "n_scored_bp": 10,
                    "n_oov_bp": 0,
                }
            )
    out.append({**out[0], "chrom": "21", "pos": 7})
    return out


def test_cadd_tsv_tabix_query_by_region(tmp_path) -> None:
    path = tmp_path / "ism.tsv.bgz"
    assert write_ism(path, rows()) == 7  # ok rows only
    assert sorted(os.listdir(tmp_path)) == ["ism.tsv.bgz", "ism.tsv.bgz.tbi"]  # no temp files left
    with pysam.TabixFile(str(path)) as tbx:
        assert list(tbx.header) == [
            "## hexamer recipe=window window_placement=grid:128",  # how the scores were made
            "\t".join(CADD_COLUMNS),
        ]
        assert set(tbx.contigs) == {"20", "21"}
        hits = [line.split("\t") for line in tbx.fetch("20", 100, 101)]  # 0-based half-open: POS 101
        assert hits == [["20", "101", "G", "A", "-1.5", ""], ["20", "101", "G", "C", "0.25", ""]]
        assert len(list(tbx.fetch("20:100-102"))) == 6  # samtools-style region string
        assert len(list(tbx.fetch("21"))) == 1


def test_a_score_file_holds_scores_of_one_placement(tmp_path) -> None:
    mixed = rows()
    mixed[0] = {**mixed[0], "window_placement": "centred"}
    with pytest.raises(ValueError, match="different recipes or window placements"):
        write_ism(tmp_path / "ism.tsv.bgz", mixed)
    assert not os.listdir(tmp_path)
    assert cadd_comment([{**r, "recipe": "next_base", "window_placement": None} for r in rows()]) == (
        "## hexamer recipe=next_base"
    )


def test_columns_are_the_documented_ones() -> None:
    """The table columns docs/ism.md lists (the VEP row's columns but the record keys, and ``phred``)."""
    docs = (Path(__file__).resolve().parents[2] / "docs" / "ism.md").read_text()
    listed = re.search(r"\| every row: `([a-z_ ]+)` \|", docs)
    assert listed is not None and tuple(listed.group(1).split()) == ISM_COLUMNS


def test_tables_keep_every_row(tmp_path) -> None:
    assert write_ism(tmp_path / "ism.parquet", rows()) == 10
    table = pq.read_table(tmp_path / "ism.parquet")
    assert table.column_names == list(ISM_COLUMNS) and table.num_rows == 10
    assert table.column("status").to_pylist().count("skipped") == 3
    write_ism(tmp_path / "ism.tsv", rows())
    assert (tmp_path / "ism.tsv").read_text().splitlines()[0].split("\t") == list(ISM_COLUMNS)


def test_output_format_names_extensions() -> None:
    assert output_format("x.tsv.gz") == "cadd" and output_format("x.TSV.BGZ") == "cadd"
    assert output_format("x.parquet") == "parquet"
    with pytest.raises(ValueError, match=r"\.tsv\.bgz"):
        output_format("x.bed")
