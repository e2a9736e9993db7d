"""ShardStore: atomic, checksummed shards; resume trusts only what verifies (no Ray needed)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from hexamer.distributed.sharding import shards_of
from hexamer.distributed.store import ShardStore, run_folder
from hexamer.vep.job import ResumeError

SCHEMA = pa.schema([("record", pa.int64()), ("chrom", pa.string())])
META = {"format": "test/1", "settings": {"window": 600}, "command": "hexamer vep ..."}


def _rows(first: int, n: int, chrom: str = "20") -> list[dict]:
    return [{"record": i, "chrom": chrom} for i in range(first, first + n)]


def test_commit_resume_and_merge_in_input_order(tmp_path) -> None:
    folder = run_folder(tmp_path / "out.tsv")
    store = ShardStore(folder, META, schema=SCHEMA, resume=False)
    store.commit(1, 2, 2, _rows(2, 2, "21"))
    store.commit(0, 0, 2, _rows(0, 2))
    again = ShardStore(folder, {**META, "command": "another"}, schema=SCHEMA, resume=True)
    assert sorted(again.entries) == [0, 1]
    assert [r["record"] for r in again.rows(["record"])] == [0, 1, 2, 3]
    assert again.contigs() == ["20", "21"]
    again.check_complete(4)
    with pytest.raises(RuntimeError, match="5"):
        again.check_complete(5)


def test_resume_drops_corrupt_unlisted_and_failed_shards(tmp_path) -> None:
    folder = run_folder(tmp_path / "out.tsv")
    store = ShardStore(folder, META, schema=SCHEMA, resume=False)
    store.commit(0, 0, 2, _rows(0, 2))
    store.commit(1, 2, 2, _rows(2, 2))
    store.commit(2, 4, 2, _rows(4, 2), failed=True)
    (folder / "shard-000001").write_bytes(b"not parquet")
    (folder / "shard-000009").write_bytes(b"never committed")
    notes: list[str] = []
    again = ShardStore(folder, META, schema=SCHEMA, resume=True, on_note=notes.append)
    assert sorted(again.entries) == [0]
    assert any("corrupt" in n for n in notes)
    assert sorted(p.name for p in folder.glob("shard-*")) == ["shard-000000"]


def test_another_job_is_refused_and_a_fresh_run_starts_over(tmp_path) -> None:
    folder = run_folder(tmp_path / "out.tsv")
    ShardStore(folder, META, schema=SCHEMA, resume=False).commit(0, 0, 1, _rows(0, 1))
    with pytest.raises(ResumeError, match="settings"):
        ShardStore(folder, {**META, "settings": {"window": 8192}}, schema=SCHEMA, resume=True)
    assert ShardStore(folder, META, schema=SCHEMA, resume=False).entries == {}


def test_shards_keep_global_record_numbers() -> None:
    shards = list(shards_of(iter(range(7)), 3))
    assert [(s.index, s.first, s.records) for s in shards] == [
        (0, 0, [0, 1, 2]),
        (1, 3, [3, 4, 5]),
        (2, 6, [6]),
    ]
    with pytest.raises(ValueError):
        list(shards_of([], 0))


def test_a_missing_manifest_is_said_and_every_shard_computed_again(tmp_path) -> None:
    folder = run_folder(tmp_path / "out.tsv")
    store = ShardStore(folder, META, schema=SCHEMA, resume=False)
    store.commit(0, 0, 2, _rows(0, 2))
    manifest = folder / "shards.json"
    manifest.unlink()
    notes: list[str] = []
    again = ShardStore(folder, META, schema=SCHEMA, resume=True, on_note=notes.append)
    assert again.entries == {}
    assert any(manifest.name in n and "missing" in n and "computed again" in n for n in notes)
    assert list(folder.glob("shard-*")) == []
