"""run_vep: checkpoints, and a killed run that resumes to the uninterrupted output."""

from __future__ import annotations

import contextlib
import json
import random
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from hexamer import Carbon
from hexamer.testing.interrupts import Killed
from hexamer.testing.interrupts import kill_after as kill_after_rows
from hexamer.vep import (
    ResumeError,
    run_vep,
    score_variants,
    sidecar_dir,
    write_rows,
    write_vep_output,
)
from hexamer.vep import checkpoint as checkpoint_mod
from hexamer.vep import runner as runner_mod
from hexamer.vep import settings as engine_mod

from .conftest import FASTA, MALFORMED_VCF


def _run_until_killed(
    carbon: Carbon, vcf: Path, out: Path, *, kill_after: int, checkpoint_rows: int, resume: bool = False
) -> None:
    """Run the job with a progress hook that raises ``Killed`` after ``kill_after`` rows."""
    with pytest.raises(Killed):
        run_vep(
            carbon,
            vcf,
            FASTA,
            out,
            resume=resume,
            checkpoint_rows=checkpoint_rows,
            on_progress=kill_after_rows(kill_after),
            on_note=lambda _: None,
            **SETTINGS,
        )


@contextlib.contextmanager
def _count_sites() -> Iterator[list[int]]:
    """Count the window sites the engine computes (not those taken from a checkpoint)."""
    computed: list[int] = []
    original = runner_mod.Runner.window

    def counting(self: object, sites: list) -> list:
        computed.append(len(sites))
        return original(self, sites)  # type: ignore[arg-type]

    runner_mod.Runner.window = counting  # type: ignore[method-assign]
    try:
        yield computed
    finally:
        runner_mod.Runner.window = original  # type: ignore[method-assign]


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
    _run_until_killed(carbon, job_vcf, out, kill_after=30, checkpoint_rows=1)
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
    _run_until_killed(carbon, job_vcf, out, kill_after=10, checkpoint_rows=1)
    with pytest.raises(ResumeError, match="changed: settings") as err:
        run_vep(carbon, job_vcf, FASTA, out, resume=True, **{**SETTINGS, "window": 900})
    old_window = SETTINGS.get("window", engine_mod.VepSettings().window)
    assert f"window {old_window!r} -> 900" in str(err.value)
    assert f"pass the old values: --window {old_window}" in str(err.value)
    # a default that moved between versions (the token budget did): the message says what to pass
    budget = engine_mod.VepSettings().checked(carbon).token_budget
    with pytest.raises(ResumeError, match=f"token_budget {budget} -> 512.*--token-budget {budget}"):
        run_vep(carbon, job_vcf, FASTA, out, resume=True, **{**SETTINGS, "token_budget": 512})
    (sidecar_dir(out) / "meta.json").write_text("[1, 2]")  # JSON, but not a job description
    with pytest.raises(ResumeError, match="different job"):
        run_vep(carbon, job_vcf, FASTA, out, resume=True, **SETTINGS)
    _run_until_killed(carbon, job_vcf, out, kill_after=10, checkpoint_rows=1)
    resumed = run_vep(
        carbon,
        job_vcf,
        FASTA,
        out,
        resume=True,
        on_note=lambda _: None,
        **{**SETTINGS, "token_budget": budget},
    )
    assert resumed.n_resumed > 0
    _run_until_killed(carbon, job_vcf, out, kill_after=10, checkpoint_rows=1)
    # without resume the old sidecar is discarded and the job starts over
    result = run_vep(carbon, job_vcf, FASTA, out, on_note=lambda _: None, **SETTINGS)
    assert result.n_resumed == 0 and out.exists() and not sidecar_dir(out).exists()
    assert result.n_rows == sum(result.status_counts.values())
    assert set(result.status_counts) == {"ok", "skipped", "ref_mismatch"}


def test_a_sidecar_from_before_a_new_setting_resumes(carbon: Carbon, job_vcf: Path, tmp_path: Path) -> None:
    """An older sidecar lacks settings added since (here ``window_grid``): it ran with their
    defaults, so it still resumes; a non-default value is a different job."""

    out = tmp_path / "out.tsv"
    _run_until_killed(carbon, job_vcf, out, kill_after=10, checkpoint_rows=1)
    meta_path = sidecar_dir(out) / "meta.json"
    meta = json.loads(meta_path.read_text())
    assert meta["settings"].pop("window_grid") == 1
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(ResumeError, match="changed: settings"):
        run_vep(carbon, job_vcf, FASTA, out, resume=True, **{**SETTINGS, "window_grid": 100})
    result = run_vep(carbon, job_vcf, FASTA, out, resume=True, on_note=lambda _: None, **SETTINGS)
    assert result.n_resumed > 0


def test_bad_output_paths_fail_before_any_work(carbon: Carbon, job_vcf: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="supported extensions"):
        run_vep(carbon, job_vcf, FASTA, tmp_path / "out.xlsx", **SETTINGS)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        run_vep(carbon, job_vcf, FASTA, tmp_path / "no" / "out.tsv", **SETTINGS)


# --------------------------------------------------------------------------- sorted chunks, k-way merge


@pytest.fixture
def small_fanin(monkeypatch: pytest.MonkeyPatch) -> None:
    """Merge every 3 chunks of one span, so these small jobs build several levels of chunks."""
    monkeypatch.setattr(checkpoint_mod, "CHUNK_FANIN", 3)


@pytest.fixture(scope="module")
def clean_output(
    carbon: Carbon, job_vcf: Path, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], bytes]:
    """The uninterrupted run's output, by extension (default checkpoints: a single chunk)."""
    cache: dict[str, bytes] = {}

    def get(ext: str) -> bytes:
        if ext not in cache:
            out = tmp_path_factory.mktemp("clean") / f"clean.{ext}"
            run_vep(carbon, job_vcf, FASTA, out, on_note=lambda _: None, **SETTINGS)
            cache[ext] = out.read_bytes()
        return cache[ext]

    return get


def _provenance(path: Path) -> dict[str, str] | None:
    """The ``##hexamer_KEY=VALUE`` header lines of a run_vep VCF output (None for a table), to
    write the same header from rows in memory."""
    if not str(path).endswith((".vcf", ".vcf.gz", ".bcf")):
        return None
    import pysam

    with pysam.VariantFile(str(path)) as vf:
        lines = [str(r).rstrip("\n") for r in vf.header.records]
    found = dict(line[len("##hexamer_") :].split("=", 1) for line in lines if line.startswith("##hexamer_"))
    assert list(found) == ["version", "model", "settings", "command"]
    return found


def _chunk_keys(path: Path) -> list[tuple[int, int]]:
    table = pq.read_table(path, columns=["record", "alt_index"])
    return list(zip(table["record"].to_pylist(), table["alt_index"].to_pylist(), strict=True))


@pytest.mark.parametrize("ext", ["parquet", "tsv", "vcf.gz"])
def test_merged_chunks_equal_the_in_memory_output(
    carbon: Carbon,
    job_vcf: Path,
    tmp_path: Path,
    ext: str,
    small_fanin: None,
    clean_output: Callable[[str], bytes],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    arrived: list[list[tuple[int, int]]] = []  # rows of each checkpoint, as the engine gave them
    n_chunks: list[int] = []
    original = checkpoint_mod.ChunkStore.add

    def spy(self: checkpoint_mod.ChunkStore, rows: list[dict]) -> None:
        arrived.append([(r["record"], r["alt_index"]) for r in rows])
        original(self, rows)
        files = sorted(self.side.glob("rows-*.parquet"))
        n_chunks.append(len(files))
        for path in files:
            keys = _chunk_keys(path)
            assert keys == sorted(keys), path.name  # every chunk is sorted on disk

    monkeypatch.setattr(checkpoint_mod.ChunkStore, "add", spy)
    out = tmp_path / f"out.{ext}"
    result = run_vep(carbon, job_vcf, FASTA, out, checkpoint_rows=4, on_note=lambda _: None, **SETTINGS)
    flat = [key for keys in arrived for key in keys]
    assert flat != sorted(flat)  # the engine gives rows out of record order (locus order in a block)
    assert any(keys != sorted(keys) for keys in arrived)  # ... even within one checkpoint
    assert len(arrived) >= 9 and max(n_chunks) <= 2 * 2  # 9+ checkpoints, 2 levels of at most 2 chunks
    assert result.n_rows == len(flat) == len(set(flat))

    # the same rows, all in memory, through the writers' sorting path
    rows = list(score_variants(carbon, job_vcf, FASTA, on_note=lambda _: None, **SETTINGS))
    random.Random(1).shuffle(rows)
    in_memory = tmp_path / f"in_memory.{ext}"
    write_vep_output(in_memory, job_vcf, rows, recipe="window", provenance=_provenance(out))
    assert out.read_bytes() == in_memory.read_bytes() == clean_output(ext)
    ok = [r for r in sorted(rows, key=lambda r: (r["record"], r["alt_index"])) if r["status"] == "ok"]
    assert list(result.scores) == [r["score"] for r in ok]
    assert list(result.kinds) == [r["kind"] for r in ok] and result.kinds == [r["kind"] for r in ok]
    assert result.status_counts == dict(Counter(r["status"] for r in rows))


@pytest.mark.parametrize(
    ("ext", "kills"),
    [
        ("parquet", (1,)),
        ("tsv", (25,)),
        ("vcf.gz", (55,)),
        ("parquet", (8, 30, 60)),  # killed again while resuming, twice
        ("vcf.gz", (20, 45)),
    ],
)
def test_resume_after_kills_anywhere_is_byte_identical(
    carbon: Carbon,
    job_vcf: Path,
    tmp_path: Path,
    ext: str,
    kills: tuple[int, ...],
    small_fanin: None,
    clean_output: Callable[[str], bytes],
) -> None:
    out = tmp_path / f"out.{ext}"
    for i, after in enumerate(kills):
        _run_until_killed(carbon, job_vcf, out, kill_after=after, checkpoint_rows=2, resume=i > 0)
        assert not out.exists()
    result = run_vep(
        carbon, job_vcf, FASTA, out, resume=True, checkpoint_rows=2, on_note=lambda _: None, **SETTINGS
    )
    assert (result.n_resumed > 0) == (kills != (1,))  # killed in its first unit: nothing was kept
    assert out.read_bytes() == clean_output(ext)
    assert not sidecar_dir(out).exists()


def test_merge_killed_before_removing_its_inputs(
    carbon: Carbon,
    job_vcf: Path,
    tmp_path: Path,
    small_fanin: None,
    clean_output: Callable[[str], bytes],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out = tmp_path / "out.tsv"
    calls = [0]
    original = checkpoint_mod.ChunkStore._merge_last

    def merge_then_die(self: checkpoint_mod.ChunkStore, n: int) -> None:
        calls[0] += 1
        if calls[0] < 3:
            original(self, n)
            return
        group = self.chunks[-n:]
        name = checkpoint_mod.chunk_name(group[0].first, group[-1].last)
        write_rows(self.side / name, checkpoint_mod.merged_rows([c.path for c in group]), presorted=True)
        raise Killed  # the merged chunk is there, its inputs too

    monkeypatch.setattr(checkpoint_mod.ChunkStore, "_merge_last", merge_then_die)
    with pytest.raises(Killed):
        run_vep(carbon, job_vcf, FASTA, out, checkpoint_rows=1, on_note=lambda _: None, **SETTINGS)
    names = sorted(p.name for p in sidecar_dir(out).glob("rows-*.parquet"))
    assert any(name.count("-") == 2 for name in names) and len(names) > 3
    monkeypatch.setattr(checkpoint_mod.ChunkStore, "_merge_last", original)
    result = run_vep(carbon, job_vcf, FASTA, out, resume=True, on_note=lambda _: None, **SETTINGS)
    assert result.n_resumed > 0 and result.n_rows == sum(result.status_counts.values())
    assert out.read_bytes() == clean_output("tsv")


def test_unsorted_chunks_of_an_older_version_are_sorted_on_resume(
    carbon: Carbon, job_vcf: Path, tmp_path: Path, clean_output: Callable[[str], bytes]
) -> None:
    out = tmp_path / "out.parquet"
    _run_until_killed(carbon, job_vcf, out, kill_after=40, checkpoint_rows=10)
    chunks = sorted(sidecar_dir(out).glob("rows-*.parquet"))
    assert chunks
    manifest = sidecar_dir(out) / "chunks.json"
    hashes = json.loads(manifest.read_text())["sha256"]
    for path in chunks:  # as the previous version wrote them: in the engine's order
        table = pq.read_table(path)
        pq.write_table(table.take(list(reversed(range(table.num_rows)))), path)
        hashes[path.name] = checkpoint_mod.file_sha256(path)
    manifest.write_text(json.dumps({"sha256": hashes}))
    assert any(_chunk_keys(p) != sorted(_chunk_keys(p)) for p in chunks)
    result = run_vep(carbon, job_vcf, FASTA, out, resume=True, on_note=lambda _: None, **SETTINGS)
    assert result.n_resumed > 0
    assert out.read_bytes() == clean_output("parquet")


def test_done_keys_are_compact_and_answer_what_the_engine_asks() -> None:
    done = checkpoint_mod.DoneKeys()
    done.add(np.array([0, 0, 5, 5, 5, 1_000]), np.array([0, 1, 0, 2, 12, 7]))
    done.add(np.array([5, 3]), np.array([2, 0]))  # a key seen again is counted once
    keys = {(0, 0), (0, 1), (5, 0), (5, 2), (5, 12), (1_000, 7), (3, 0)}
    assert len(done) == len(keys) and set(done) == keys
    assert all(k in done for k in keys)
    assert (0, 2) not in done and (5, 11) not in done and (1_001, 0) not in done and (-1, 0) not in done
    assert done[(5, 12)] == {"record": 5, "alt_index": 12}
    with pytest.raises(KeyError):
        done[(4, 0)]
    assert done._mask.nbytes <= 2_000  # about a byte per record


def test_chunk_store_merges_in_tiers_and_streams_sorted(tmp_path: Path, small_fanin: None) -> None:
    rng = random.Random(3)
    keys = [(r, a) for r in range(150) for a in range(rng.randint(1, 3))]
    order = keys[:]
    rng.shuffle(order)
    store = checkpoint_mod.ChunkStore(tmp_path)
    most = adds = i = 0
    while i < len(order):
        n = rng.randint(1, 9)
        store.add([_row(*key) for key in order[i : i + n]])
        adds += 1
        i += n
        most = max(most, len(list(tmp_path.glob("rows-*.parquet"))))
    assert adds > 27 and most <= 2 * 4  # (fan-in - 1) per level, log3(~60 checkpoints) levels
    got = [(r["record"], r["alt_index"]) for r in store.rows()]
    assert got == keys
    again = checkpoint_mod.ChunkStore(tmp_path)
    again.scan()
    assert set(again.load_keys()) == set(keys)
    assert [(r["record"], r["alt_index"]) for r in again.rows()] == keys


def _row(record: int, alt: int) -> dict:
    return {"record": record, "alt_index": alt, "chrom": "20", "status": "ok", "score": record / 3}


def test_sorted_vcf_output_is_indexed_and_trailing_malformed_rows_count(
    carbon: Carbon, tmp_path: Path, small_fanin: None
) -> None:
    src = tmp_path / "in.vcf"
    src.write_text(
        MALFORMED_VCF.read_text().replace("\t0\tpos_zero", "\t60950\tpos_fine") + "20\tlast\n20\tlast2\n"
    )
    rows = list(score_variants(carbon, src, FASTA, on_note=lambda _: None, **SETTINGS))
    assert rows[-1]["status"] == "failed"  # the last lines cannot be written back to a VCF
    out = tmp_path / "out.vcf.gz"
    _run_until_killed(carbon, src, out, kill_after=7, checkpoint_rows=1)
    result = run_vep(
        carbon, src, FASTA, out, resume=True, checkpoint_rows=1, on_note=lambda _: None, **SETTINGS
    )
    assert result.n_resumed > 0
    assert result.n_rows == len(rows) and result.status_counts == dict(Counter(r["status"] for r in rows))
    assert result.vcf is not None and result.vcf.n_malformed == 4
    assert result.vcf.index == str(out) + ".tbi" and Path(result.vcf.index).exists()
    in_memory = tmp_path / "in_memory.vcf.gz"
    write_vep_output(in_memory, src, rows, recipe="window", provenance=_provenance(out))
    assert out.read_bytes() == in_memory.read_bytes()


# --------------------------------------------------------------------------- trust: checksums and input identity


def test_a_corrupted_chunk_is_recomputed_not_trusted(
    carbon: Carbon, job_vcf: Path, tmp_path: Path, clean_output: Callable[[str], bytes]
) -> None:
    out = tmp_path / "out.tsv"
    _run_until_killed(carbon, job_vcf, out, kill_after=40, checkpoint_rows=4)
    chunks = sorted(sidecar_dir(out).glob("rows-*.parquet"), key=lambda p: p.stat().st_size)
    victim = chunks[-1]
    n_kept = sum(pq.read_metadata(p).num_rows for p in chunks[:-1])
    data = bytearray(victim.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 16] = bytes(b ^ 0xFF for b in data[middle : middle + 16])
    victim.write_bytes(bytes(data))  # same size: 16 flipped bytes inside the chunk
    notes: list[str] = []
    result = run_vep(carbon, job_vcf, FASTA, out, resume=True, on_note=notes.append, **SETTINGS)
    assert any(victim.name in note and "corrupt" in note for note in notes)
    assert out.read_bytes() == clean_output("tsv")  # the victim's rows were computed again
    assert result.n_resumed == n_kept


def test_a_deleted_chunk_manifest_is_said_and_every_row_computed_again(
    carbon: Carbon, job_vcf: Path, tmp_path: Path, clean_output: Callable[[str], bytes]
) -> None:
    out = tmp_path / "out.tsv"
    _run_until_killed(carbon, job_vcf, out, kill_after=40, checkpoint_rows=4)
    manifest = sidecar_dir(out) / "chunks.json"
    assert list(sidecar_dir(out).glob("rows-*.parquet"))
    manifest.unlink()
    notes: list[str] = []
    result = run_vep(carbon, job_vcf, FASTA, out, resume=True, on_note=notes.append, **SETTINGS)
    assert any(str(manifest) in note and "missing" in note and "computed again" in note for note in notes)
    assert result.n_resumed == 0
    assert out.read_bytes() == clean_output("tsv")


def test_an_edited_input_with_the_same_size_and_mtime_does_not_resume(
    carbon: Carbon, job_vcf: Path, tmp_path: Path
) -> None:
    import os

    vcf = tmp_path / "job.vcf"
    vcf.write_bytes(job_vcf.read_bytes())
    out = tmp_path / "out.parquet"
    _run_until_killed(carbon, vcf, out, kill_after=10, checkpoint_rows=1)
    before = vcf.stat()
    text = vcf.read_bytes()
    i = text.index(b"\tmulti_snv\t")
    vcf.write_bytes(text[:i] + b"\tmulti_snX\t" + text[i + 11 :])  # one byte changed
    os.utime(vcf, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert vcf.stat().st_size == before.st_size and vcf.stat().st_mtime_ns == before.st_mtime_ns
    with pytest.raises(ResumeError, match=r"changed: vcf\)"):
        run_vep(carbon, vcf, FASTA, out, resume=True, **SETTINGS)


def test_a_chunk_written_but_never_recorded_is_dropped(carbon: Carbon, job_vcf: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.tsv"
    _run_until_killed(carbon, job_vcf, out, kill_after=20, checkpoint_rows=4)
    side = sidecar_dir(out)
    listed = set(json.loads((side / "chunks.json").read_text())["sha256"])
    assert listed == {p.name for p in side.glob("rows-*.parquet")}
    stray = side / "rows-999990.parquet"  # as if killed between writing a chunk and recording it
    stray.write_bytes(next(iter(side.glob("rows-*.parquet"))).read_bytes())
    result = run_vep(carbon, job_vcf, FASTA, out, resume=True, on_note=lambda _: None, **SETTINGS)
    assert result.n_resumed > 0 and result.n_rows == sum(result.status_counts.values())


def test_the_vcf_header_names_the_command_that_started_the_job(
    carbon: Carbon, job_vcf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    out = tmp_path / "out.vcf.gz"
    monkeypatch.setattr(sys, "argv", ["/usr/bin/hexamer", "vep", "--vcf", "my calls.vcf"])
    _run_until_killed(carbon, job_vcf, out, kill_after=10, checkpoint_rows=1)
    monkeypatch.setattr(sys, "argv", ["/usr/bin/hexamer", "vep", "--vcf", "my calls.vcf", "--resume"])
    run_vep(carbon, job_vcf, FASTA, out, resume=True, on_note=lambda _: None, **SETTINGS)
    provenance = _provenance(out)
    assert provenance is not None
    assert provenance["command"] == "hexamer vep --vcf 'my calls.vcf'"
    assert provenance["settings"].startswith("recipe=window,window=600,")
    assert provenance["model"] == carbon.fingerprint()


def test_a_setting_dropped_since_the_checkpoint_is_named(
    carbon: Carbon, job_vcf: Path, tmp_path: Path
) -> None:
    """A key only the old checkpoint has (e.g. a --rename-chrs table not passed again) is listed
    as changed instead of leaving the 'changed:' list empty."""
    out = tmp_path / "out.tsv"
    _run_until_killed(carbon, job_vcf, out, kill_after=10, checkpoint_rows=1)
    meta_path = sidecar_dir(out) / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["renames"] = {"20": "chr20"}
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(ResumeError, match=r"changed: renames\)"):
        run_vep(carbon, job_vcf, FASTA, out, resume=True, **SETTINGS)
