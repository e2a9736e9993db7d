"""hexamer bench scaleout on a toy workload: three rows, outputs byte-identical (slow: starts Ray)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("ray")

FASTA = Path(__file__).resolve().parents[1] / "data" / "vep" / "chr20_slice.fa.gz"


@pytest.mark.slow
def test_bench_scaleout_reports_three_pipelines(tiny_folder: Path) -> None:
    import ray

    from hexamer.bench.scaleout import bench_scaleout

    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        report = bench_scaleout(tiny_folder, FASTA, sites=8, window=300, block_records=4, shard_records=4)
    finally:
        if started:
            ray.shutdown()
    assert [r["pipeline"] for r in report.rows] == ["single process", "ray, 1 worker", "ray, 2 workers"]
    assert all(r["variants"] == 8 for r in report.rows)
    assert any("byte-identical to the single-process file: yes" in n for n in report.notes)
