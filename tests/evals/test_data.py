"""Table loading: formats, the published --max_samples sample, row-group reads, schema errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest

from hexamer.evals.data import ROW_INDEX, find_file, read_rows, sample_indices
from hexamer.evals.task import DatasetSchemaError

ROWS = [{"sequence": f"ACGT{i}", "label": "A" * (i % 5 + 1), "type": f"t{i % 3}"} for i in range(23)]


def test_sample_is_pandas_df_sample() -> None:
    """pandas' df.sample(n, random_state=s) draws RandomState(s).choice(N, n, replace=False)."""
    rs = np.random.RandomState(0)
    assert sample_indices(100, 7, 0).tolist() == rs.permutation(100)[:7].tolist()
    assert sample_indices(100, 30, 0)[:7].tolist() == sample_indices(100, 7, 0).tolist()  # prefix-stable
    assert sample_indices(5, 10).tolist() == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("fmt", ["parquet", "csv", "tsv", "jsonl", "arrow"])
def test_formats_give_the_same_rows(tmp_path: Path, fmt: str) -> None:
    table = pa.Table.from_pylist(ROWS)
    path = tmp_path / f"t.{fmt}"
    if fmt == "parquet":
        pq.write_table(table, path, row_group_size=4)
    elif fmt in ("csv", "tsv"):
        sep = "," if fmt == "csv" else "\t"
        path.write_text(
            "sequence,label,type\n".replace(",", sep) + "".join(sep.join(r.values()) + "\n" for r in ROWS)
        )
    elif fmt == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    else:
        feather.write_feather(table, path)
    rows = read_rows(path, required=["sequence", "label"], optional=["type", "missing"], limit=9, seed=3)
    want = sample_indices(len(ROWS), 9, 3).tolist()
    assert [r[ROW_INDEX] for r in rows] == want
    assert [r["sequence"] for r in rows] == [ROWS[i]["sequence"] for i in want]
    assert all(set(r) == {"sequence", "label", "type", ROW_INDEX} for r in rows)


def test_parquet_row_group_read_matches_full_read(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    pq.write_table(pa.Table.from_pylist(ROWS), path, row_group_size=3)
    full = read_rows(path, required=["sequence"])
    for limit in (1, 5, 22):
        part = read_rows(path, required=["sequence"], limit=limit, seed=1)
        assert [r["sequence"] for r in part] == [full[i]["sequence"] for i in sample_indices(23, limit, 1)]


def test_schema_error_lists_expected_columns(tmp_path: Path) -> None:
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.Table.from_pylist([{"seq": "ACGT"}]), path)
    expected = {"sequence": "DNA context", "label": "held-out continuation"}
    with pytest.raises(DatasetSchemaError) as err:
        read_rows(path, required=["sequence", "label"], expected=expected)
    text = str(err.value)
    assert (
        "missing column(s) label, sequence" in text
        and "held-out continuation" in text
        and "found: seq" in text
    )


def test_find_file(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    f = tmp_path / "a" / "x.parquet"
    f.write_bytes(b"")
    assert find_file(tmp_path, ["b/x.parquet", "a/x.parquet"], "t") == f
    assert find_file(f, [], "t") == f
    with pytest.raises(FileNotFoundError, match="looked for"):
        find_file(tmp_path, ["nope.parquet"], "t")


def test_materialize_paths_hub_files_and_datasets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import types

    import huggingface_hub

    from hexamer.evals.data import materialize

    assert materialize(tmp_path / "x.parquet") == tmp_path / "x.parquet"
    calls = []

    def fake_download(repo_id: str, filename: str, repo_type: str) -> str:
        calls.append((repo_id, filename, repo_type))
        return str(tmp_path / "dl.parquet")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    got = materialize("hf://datasets/HuggingFaceBio/brca2-vep/brca2_vep.parquet")
    assert got == tmp_path / "dl.parquet" and calls == [
        ("HuggingFaceBio/brca2-vep", "brca2_vep.parquet", "dataset")
    ]

    class FakeDataset:
        def to_parquet(self, path: str) -> None:
            pq.write_table(pa.Table.from_pylist(ROWS), path)

    loaded = []
    fake = types.SimpleNamespace(
        load_dataset=lambda name, config, split: loaded.append((name, config, split)) or FakeDataset()
    )
    monkeypatch.setitem(sys.modules, "datasets", fake)
    out = materialize("GenerTeam/sequence-recovery", export_dir=tmp_path / "exp", config="eukaryote")
    assert loaded == [("GenerTeam/sequence-recovery", "eukaryote", "test")]
    assert len(read_rows(out, required=["sequence"])) == len(ROWS)
    assert materialize("GenerTeam/sequence-recovery", export_dir=tmp_path / "exp", config="eukaryote") == out
    assert len(loaded) == 1  # exported once
