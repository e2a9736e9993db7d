"""A VEP job reads its input VCF once: the surveys before scoring read the header (and an index)
only, the input is identified without hashing it through, and the one pass that scores the
records keeps what the VCF writer needs (the completed header, a copy of the data lines).

Reads are measured where they happen: bytes that Python code reads from the input (the raw lines
read next to pysam, header parsing, the identity sample) and the times htslib opens it
(``pysam.VariantFile``), each such open being one pass over the records.
"""

from __future__ import annotations

import builtins
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pysam
import pytest

from hexamer import Carbon
from hexamer.io.reference import Reference
from hexamer.io.vcf.contig_survey import survey_contigs
from hexamer.io.vcf.index import indexed_records
from hexamer.vep import checkpoint as checkpoint_mod
from hexamer.vep import run_vep

from .conftest import FASTA, SLICE_VCF

SETTINGS = {"recipe": "window", "window": 120, "batch_size": 4}


class _Counted:
    """A file object that adds the bytes read from it to ``reads``."""

    def __init__(self, f: Any, reads: list[int]) -> None:
        self._f, self._reads = f, reads

    def _add(self, data: Any) -> Any:
        self._reads[0] += len(data) if data is not None else 0
        return data

    def read(self, *a: Any) -> Any:
        return self._add(self._f.read(*a))

    def read1(self, *a: Any) -> Any:
        return self._add(self._f.read1(*a))

    def readline(self, *a: Any) -> Any:
        return self._add(self._f.readline(*a))

    def readinto(self, b: Any) -> int:
        n = self._f.readinto(b)
        self._reads[0] += n or 0
        return n

    def __iter__(self) -> Iterator[Any]:
        for line in self._f:
            yield self._add(line)

    def __enter__(self) -> _Counted:
        return self

    def __exit__(self, *exc: object) -> None:
        self._f.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)


@pytest.fixture
def big_vcf(tmp_path: Path) -> Path:
    """The slice's records, then 20,000 on a contig the FASTA lacks (skipped without model work)."""
    text = SLICE_VCF.read_text()
    head, _, body = text.partition("#CHROM")
    line, _, records = body.partition("\n")
    filler = "".join(f"chrUn\t{1000 + i}\tfill{i}\tA\tG\t50\tPASS\t.\n" for i in range(20_000))
    path = tmp_path / "calls.vcf"
    path.write_text(head + "##contig=<ID=chrUn>\n#CHROM" + line + "\n" + records + filler)
    return path


@pytest.fixture
def reads(big_vcf: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, list[int]]:
    """``{"bytes": [n], "htslib": [n]}``: bytes Python read from ``big_vcf``, htslib opens of it."""
    counts = {"bytes": [0], "htslib": [0]}
    target = os.path.realpath(big_vcf)
    real_open, real_variant_file = builtins.open, pysam.VariantFile

    def counted_open(file: Any, *a: Any, **k: Any) -> Any:
        f = real_open(file, *a, **k)
        if isinstance(file, str | os.PathLike) and os.path.realpath(file) == target:
            return _Counted(f, counts["bytes"])
        return f

    def counted_variant_file(file: Any, *a: Any, **k: Any) -> Any:
        if isinstance(file, str | os.PathLike) and os.path.realpath(file) == target:
            counts["htslib"][0] += 1
        return real_variant_file(file, *a, **k)

    monkeypatch.setattr(builtins, "open", counted_open)
    monkeypatch.setattr(pysam, "VariantFile", counted_variant_file)
    # a small sample, so that the identity's share of the bytes stands out from a whole read
    monkeypatch.setattr(checkpoint_mod, "SAMPLE_EDGE", 4096)
    monkeypatch.setattr(checkpoint_mod, "SAMPLES", 8)
    return counts


def _job(carbon: Carbon, vcf: Path, out: Path) -> None:
    """What ``hexamer vep`` does with the input: survey and total before, the job, survey after."""
    with Reference(FASTA) as reference:
        before = survey_contigs(vcf, reference)
        assert before.records == {"20": 0, "chrUn": 0}  # declared contigs, nothing counted
        assert indexed_records(vcf) is None  # a plain VCF has no index: a bar without total
        result = run_vep(carbon, vcf, FASTA, out, on_note=lambda _: None, **SETTINGS)
        after = survey_contigs(vcf, reference, result.contig_records)
    assert after.n_unmatched == 20_000 and after.mostly_unmatched()


def test_a_table_job_reads_its_input_once(
    carbon: Carbon, big_vcf: Path, reads: dict[str, list[int]], tmp_path: Path
) -> None:
    size = big_vcf.stat().st_size
    _job(carbon, big_vcf, tmp_path / "out.tsv")
    assert reads["htslib"][0] == 1  # the scoring pass
    # the raw lines read next to htslib (one whole read) plus the header and the identity sample
    assert size <= reads["bytes"][0] < 1.1 * size


def test_a_vcf_job_reads_its_input_once_for_scoring_and_writing(
    carbon: Carbon, big_vcf: Path, reads: dict[str, list[int]], tmp_path: Path
) -> None:
    size = big_vcf.stat().st_size
    out = tmp_path / "out.vcf.gz"
    _job(carbon, big_vcf, out)
    # one pass: the writer takes the header htslib completed and the lines the pass copied
    assert reads["htslib"][0] == 1
    assert size <= reads["bytes"][0] < 1.1 * size
    with pysam.VariantFile(str(out)) as written:
        assert sum(1 for _ in written) == 20_009  # every record written


def _provenance(path: Path) -> dict[str, str]:
    with pysam.VariantFile(str(path)) as vf:
        lines = [str(r).rstrip("\n") for r in vf.header.records]
    return dict(line[len("##hexamer_") :].split("=", 1) for line in lines if line.startswith("##hexamer_"))


def _as_bcf(src: Path, tmp: Path) -> Path:
    out = tmp / (src.stem + ".bcf")
    with pysam.VariantFile(str(src)) as vf, pysam.VariantFile(str(out), "wb", header=vf.header) as w:
        for rec in vf:
            w.write(rec)
    return out


def _as_plain_gzip(src: Path, tmp: Path) -> Path:
    import gzip

    out = tmp / (src.name + ".gz")
    out.write_bytes(gzip.compress(src.read_bytes()))
    return out


@pytest.mark.parametrize(
    ("name", "convert"),
    [
        ("edge_cases.vcf", None),
        ("malformed.vcf", None),
        ("hostile.vcf", None),
        ("edge_cases.vcf", _as_plain_gzip),
        ("chr20_slice.vcf", _as_bcf),
        ("edge_cases.vcf", _as_bcf),
    ],
)
def test_what_the_pass_keeps_writes_the_vcf_a_second_read_writes(
    carbon: Carbon, tmp_path: Path, name: str, convert: Any
) -> None:
    from hexamer.vep import score_variants, write_vep_output

    src = SLICE_VCF.with_name(name)
    if convert is not None:
        src = convert(src, tmp_path)
    rows = list(score_variants(carbon, src, FASTA, on_note=lambda _: None, **SETTINGS))
    for ext in ("vcf.gz", "bcf"):
        out = tmp_path / f"out.{ext}"
        run_vep(carbon, src, FASTA, out, on_note=lambda _: None, **SETTINGS)
        again = tmp_path / f"again.{ext}"
        write_vep_output(again, src, rows, recipe="window", provenance=_provenance(out))  # reads src
        assert out.read_bytes() == again.read_bytes()


def test_a_bcf_input_is_read_once_for_scoring_and_writing(
    carbon: Carbon, big_vcf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pass copies a BCF's records as they are (an uncompressed BCF in the sidecar)."""
    bcf = _as_bcf(big_vcf, tmp_path)
    opens = [0]
    real = pysam.VariantFile

    def counted(file: Any, *a: Any, **k: Any) -> Any:
        if isinstance(file, str | os.PathLike) and os.path.realpath(file) == os.path.realpath(bcf):
            opens[0] += 1
        return real(file, *a, **k)

    monkeypatch.setattr(pysam, "VariantFile", counted)
    out = tmp_path / "out.vcf.gz"
    run_vep(carbon, bcf, FASTA, out, on_note=lambda _: None, **SETTINGS)
    assert opens[0] == 1  # the scoring pass; the writer read the copy
    with real(str(out)) as written:
        assert sum(1 for _ in written) == 20_009


def test_a_ray_job_reads_its_input_once_for_scoring_and_writing(
    tiny_folder: Path, big_vcf: Path, reads: dict[str, list[int]], tmp_path: Path
) -> None:
    """The driver identifies the input by a sample and keeps, from the pass that feeds the actors,
    what the writer needs: a VCF's lines, a table's INFO values (the actors get records, not the file)."""
    ray = pytest.importorskip("ray")
    from hexamer.distributed import PoolSpec, WorkerPool
    from hexamer.distributed import run_vep as run_vep_ray

    size = big_vcf.stat().st_size
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        with WorkerPool(tiny_folder, PoolSpec(workers=1), batch_size=SETTINGS["batch_size"]) as pool:
            for name, info in (("out.vcf.gz", None), ("out.tsv", "AC,AN")):
                reads["bytes"][0] = reads["htslib"][0] = 0
                out = tmp_path / name
                run_vep_ray(
                    None, big_vcf, FASTA, out, pool=pool, info_fields=info, on_note=lambda _: None, **SETTINGS
                )
                # the header checked before the actors start (and read for the INFO fields'
                # declarations), then the one pass over the records
                assert reads["htslib"][0] == (3 if info else 2)
                assert size <= reads["bytes"][0] < 1.1 * size
    finally:
        if started:
            ray.shutdown()
    with pysam.VariantFile(str(tmp_path / "out.vcf.gz")) as written:
        assert sum(1 for _ in written) == 20_009
    carbon = Carbon.from_pretrained(tiny_folder, max_batch_size=SETTINGS["batch_size"])
    single = tmp_path / "single.tsv"
    run_vep(carbon, big_vcf, FASTA, single, info_fields="AC,AN", on_note=lambda _: None, **SETTINGS)
    assert (tmp_path / "out.tsv").read_bytes() == single.read_bytes()


def test_a_table_job_with_info_fields_reads_its_input_once(
    carbon: Carbon, big_vcf: Path, reads: dict[str, list[int]], tmp_path: Path
) -> None:
    size = big_vcf.stat().st_size
    out = tmp_path / "out.tsv"
    run_vep(carbon, big_vcf, FASTA, out, info_fields="AC,AN", on_note=lambda _: None, **SETTINGS)
    # the header read for the fields' declarations, then the one pass (it keeps the INFO values)
    assert reads["htslib"][0] == 2
    assert size <= reads["bytes"][0] < 1.1 * size
    assert len(out.read_text().splitlines()) == 1 + 20_009  # a header, a row per record


@pytest.mark.parametrize(
    ("name", "fields", "convert"),
    [
        ("hostile.vcf", "AF,CLNSIG,DB", None),
        ("malformed_numbers.vcf", "all", None),
        ("unreadable_fields.vcf", "NOTE", None),
        ("edge_cases.vcf", "SVTYPE,END", _as_plain_gzip),
        ("chr20_slice.vcf", "AC,AN", _as_bcf),
    ],
)
def test_the_info_values_the_pass_keeps_fill_the_table_a_second_read_fills(
    carbon: Carbon, tmp_path: Path, name: str, fields: str, convert: Any
) -> None:
    from hexamer.vep import score_variants
    from hexamer.vep.rows import ordered_rows
    from hexamer.vep.table_output import join_info, resolve_info_fields, write_rows

    src = SLICE_VCF.with_name(name)
    if convert is not None:
        src = convert(src, tmp_path)
    for ext in ("tsv", "parquet"):
        out = tmp_path / f"out.{ext}"
        run_vep(carbon, src, FASTA, out, info_fields=fields, on_note=lambda _: None, **SETTINGS)
        info = resolve_info_fields(src, fields)
        rows = ordered_rows(score_variants(carbon, src, FASTA, on_note=lambda _: None, **SETTINGS), False)
        again = tmp_path / f"again.{ext}"
        write_rows(again, join_info(rows, src, info), presorted=True, info=info)  # reads src itself
        assert out.read_bytes() == again.read_bytes()
