"""hexamer.generation_job: the generate batch job as a library function, against Carbon.generate."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from hexamer import Carbon
from hexamer.generation_job import GenerationSettings, chunk_records, failed_rows, run_generation
from hexamer.io import BadRecord, SequenceRecord


@pytest.fixture(scope="module")
def carbon(tiny_folder: Path) -> Carbon:
    return Carbon.from_pretrained(tiny_folder)


def _records() -> list[SequenceRecord | BadRecord]:
    return [
        SequenceRecord(id="a", sequence="ACGTACGTAC", index=0),
        BadRecord(index=1, id="b", reason="not DNA"),
        SequenceRecord(id="c", sequence="TTGACA", index=2),
    ]


def test_rows_are_the_python_api_samples_and_every_record_appears(carbon: Carbon, tmp_path: Path) -> None:
    settings = GenerationSettings(max_bp=12, n=2, seed=7, stop=("gg",), logprobs=True)
    out = tmp_path / "g.parquet"
    seen: list[int] = []
    result = run_generation(carbon, _records(), out, settings, on_progress=seen.append)
    rows = pq.read_table(out).to_pylist()
    assert [(r["id"], r["sample"], r["status"]) for r in rows] == [
        ("a", 0, "ok"), ("a", 1, "ok"), ("b", 0, "skipped"), ("b", 1, "skipped"), ("c", 0, "ok"), ("c", 1, "ok"),
    ]  # fmt: skip
    assert result.status_counts == {"ok": 2, "skipped": 1} and result.n_records == 3 and sum(seen) == 3
    for i, prompt in ((0, "ACGTACGTAC"), (2, "TTGACA")):  # record i, sample j: seed 7 + i * 2 + j
        want = carbon.generate(prompt, max_bp=12, n=2, seed=7 + i * 2, stop=["GG"], logprobs=True)
        got = [r for r in rows if r["id"] == "ac"[i // 2]]
        assert [r["sequence"] for r in got] == [g.sequence for g in want]
    assert result.written_bp == sum(r["n_bp"] for r in rows)


def test_settings_check_stop_strings_and_samples() -> None:
    assert GenerationSettings(stop=("taa",)).stop == ("TAA",)
    with pytest.raises(ValueError, match="stop"):
        GenerationSettings(stop=("TAX",))
    with pytest.raises(ValueError, match="n must be"):
        GenerationSettings(n=0)
    assert chunk_records(1) == 256 and chunk_records(300) == 1
    served = GenerationSettings(sampler="server", logprobs=True, top_k=5)
    assert served.sampling()["sampler"] == "server" and served.checks()["logprobs"] is True
    assert "top_k" not in GenerationSettings().sampling()  # an option at its off value is left out


def test_failed_rows_keep_every_record_and_sample() -> None:
    chunk = failed_rows(_records()[:2], "shard failed", GenerationSettings(n=3))
    assert len(chunk.rows) == 6 and chunk.statuses == ["failed", "failed"]
    assert all(r["status"] == "failed" and r["error"] == "shard failed" for r in chunk.rows)
