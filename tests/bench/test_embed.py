"""The embeddings benchmark as a Python call: hexamer's vectors against transformers' on the same weights."""

from __future__ import annotations

from pathlib import Path

import pytest

from hexamer.bench.common import BenchOptionError
from hexamer.bench.embed import run_embed_bench


def test_run_embed_bench_matches_transformers(tiny_folder: Path) -> None:
    pytest.importorskip("transformers")
    report = run_embed_bench(model=str(tiny_folder), n_seqs=3, length=120, batch_size=2)
    rows = {r["backend"]: r for r in report.rows}
    assert set(rows) == {"hexamer", "transformers"}
    assert rows["hexamer"]["max abs diff"] < 1e-4
    assert all(r["sequences"] == 3 and r["seconds"] > 0 for r in rows.values())


def test_run_embed_bench_refuses_an_unknown_shape() -> None:
    with pytest.raises(BenchOptionError, match="--shape"):
        run_embed_bench(shape="huge")
