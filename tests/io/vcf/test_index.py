"""indexed_records: the record count a tabix or CSI index keeps, read without the records."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pysam

from hexamer.io.vcf.index import indexed_records
from hexamer.io.vcf.reader import read_vcf

DATA = Path(__file__).resolve().parents[2] / "data" / "vep"


def test_tbi_and_csi_count_every_record(tmp_path: Path) -> None:
    src = DATA / "chr20_slice.vcf"
    n = sum(1 for _ in read_vcf(src))
    gz = str(tmp_path / "a.vcf.gz")
    pysam.tabix_compress(str(src), gz)
    pysam.tabix_index(gz, preset="vcf")
    assert indexed_records(gz) == n
    os.unlink(gz + ".tbi")
    pysam.tabix_index(gz, preset="vcf", csi=True, keep_original=True)
    assert indexed_records(gz) == n


def test_no_stale_or_foreign_index_gives_a_count(tmp_path: Path) -> None:
    src = tmp_path / "a.vcf"
    shutil.copy(DATA / "chr20_slice.vcf", src)
    assert indexed_records(src) is None  # no index
    (tmp_path / "a.vcf.tbi").write_bytes(b"not an index")
    assert indexed_records(src) is None  # garbage never stops a job
    gz = str(tmp_path / "b.vcf.gz")
    pysam.tabix_compress(str(src), gz)
    pysam.tabix_index(gz, preset="vcf")
    stat = os.stat(gz + ".tbi")
    os.utime(gz, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # the file is newer than its index
    assert indexed_records(gz) is None
