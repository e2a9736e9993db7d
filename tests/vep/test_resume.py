"""run_vep: checkpoints, and a killed run that resumes to the uninterrupted output."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hexamer import Carbon
from hexamer.vep import ResumeError, run_vep, sidecar_dir, write_random_vcf
from hexamer.vep import engine as engine_mod

from .conftest import EDGE_VCF, FASTA


class Killed(Exception):
    """Stands in for SIGKILL: raised from on_progress after some rows."""


def _killer(after: int) -> Callable[[int], None]:
    seen = [0]

    def on_progress(n: int) -> None:
        seen[0] += n
        if seen[0] >= after:
            raise Killed

    return on_progress


@pytest.fixture(scope="module")
def job_vcf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real edge cases plus 24 SNV sites (1-3 ALTs) to make several work units."""
    path = tmp_path_factory.mktemp("vcf") / "job.vcf"
    write_random_vcf(FASTA, path, n_sites=24, alts_per_site=2, region=("20", 300_000, 330_000), seed=5)
    edge = [line for line in EDGE_VCF.read_text().splitlines() if not line.startswith("#")]
    head = [line for line in path.read_text().splitlines() if line.startswith("##")]
    body = [line for line in path.read_text().splitlines() if not line.startswith("##")]
    extra = [line for line in EDGE_VCF.read_text().splitlines() if line.startswith("##") and "contig" in line]
    path.write_text("\n".join([*head, *extra[1:], *body, *edge]) + "\n")
    return path


@contextlib.contextmanager
def _count_sites() -> Iterator[list[int]]:
    """Count the window sites the engine computes (not those taken from a checkpoint)."""
    computed: list[int] = []
    original = engine_mod._Runner.window

    def counting(self: object, sites: list) -> list:
        computed.append(len(sites))
        return original(self, sites)  # type: ignore[arg-type]

    engine_mod._Runner.window = counting  # type: ignore[method-assign]
    try:
        yield computed
    finally:
        engine_mod._Runner.window = original  # type: ignore[method-assign]


SETTINGS = {"recipe": "window", "window": 600, "batch_size": 4}


@pytest.mark.parametrize("ext", ["tsv", "vcf.gz", "parquet"])
def test_killed_run_resumes_to_identical_output(
    carbon: Carbon, job_vcf: Path, tmp_path: Path, ext: str
) -> None:
    clean = tmp_path / f"clean.{ext}"
    with _count_sites() as all_sites:
        run_vep(carbon, job_vcf, FASTA, clean, on_note=lambda _: None, **SETTINGS)
    n_sites = sum(all_sites)
    assert not sidecar_dir(clean).exists()

    out = tmp_path / f"out.{ext}"
    with pytest.raises(Killed):
        run_vep(
            carbon,
            job_vcf,
            FASTA,
            out,
            checkpoint_rows=1,
            on_progress=_killer(30),
            on_note=lambda _: None,
            **SETTINGS,
        )
    side = sidecar_dir(out)
    assert side.is_dir() and list(side.glob("rows-*.parquet"))
    assert not out.exists()  # nothing half-written

    with _count_sites() as computed:
        result = run_vep(carbon, job_vcf, FASTA, out, resume=True, on_note=lambda _: None, **SETTINGS)
    assert result.n_resumed > 0
    assert 0 < sum(computed) < n_sites  # finished units were not recomputed
    assert out.read_bytes() == clean.read_bytes()
    assert not side.exists()
    if ext == "vcf.gz":
        assert not Path(str(out) + ".tbi").exists()  # edge cases make it unsorted


def test_resume_refuses_a_sidecar_from_another_job(carbon: Carbon, job_vcf: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.tsv"
    with pytest.raises(Killed):
        run_vep(
            carbon,
            job_vcf,
            FASTA,
            out,
            checkpoint_rows=1,
            on_progress=_killer(10),
            on_note=lambda _: None,
            **SETTINGS,
        )
    with pytest.raises(ResumeError, match="changed: settings"):
        run_vep(carbon, job_vcf, FASTA, out, resume=True, **{**SETTINGS, "window": 900})
    # without resume the old sidecar is discarded and the job starts over
    result = run_vep(carbon, job_vcf, FASTA, out, on_note=lambda _: None, **SETTINGS)
    assert result.n_resumed == 0 and out.exists() and not sidecar_dir(out).exists()
    assert result.n_rows == sum(result.status_counts.values())
    assert set(result.status_counts) == {"ok", "skipped", "ref_mismatch"}


def test_bad_output_paths_fail_before_any_work(carbon: Carbon, job_vcf: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="supported extensions"):
        run_vep(carbon, job_vcf, FASTA, tmp_path / "out.xlsx", **SETTINGS)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        run_vep(carbon, job_vcf, FASTA, tmp_path / "no" / "out.tsv", **SETTINGS)
