"""What a VCF/BCF's tabix (``.tbi``) or CSI (``.csi``) index says about the file without reading
its records: how many records it holds (htslib keeps a count per contig in a pseudo-bin)."""

from __future__ import annotations

import gzip
import os
import struct

__all__ = ["index_path", "indexed_records"]

PathLike = str | os.PathLike[str]

_TBI_PSEUDO_BIN = 37450


def index_path(vcf: PathLike) -> str | None:
    """The index next to ``vcf`` (``NAME.tbi`` or ``NAME.csi``), or ``None``."""
    for suffix in (".tbi", ".csi"):
        path = os.fspath(vcf) + suffix
        if os.path.isfile(path):
            return path
    return None


def indexed_records(vcf: PathLike) -> int | None:
    """The number of records ``vcf``'s index counts, or ``None`` when there is no index, or one
    older than the file or in a form this reader does not know (a total for a progress bar: it
    must never stop a job)."""
    path = index_path(vcf)
    if path is None or os.stat(path).st_mtime_ns < os.stat(vcf).st_mtime_ns:
        return None
    try:
        with gzip.open(path, "rb") as f:
            data = f.read()
        return (
            _tbi_records(data)
            if data[:4] == b"TBI\x01"
            else _csi_records(data)
            if data[:4] == b"CSI\x01"
            else None
        )
    except (OSError, EOFError, struct.error, ValueError):
        return None


def _bins(data: bytes, at: int, pseudo: int, loffset: bool) -> tuple[int, int]:
    """``(records, offset after the bins)`` of one reference's bins starting at ``at``."""
    (n_bin,) = struct.unpack_from("<i", data, at)
    at += 4
    records = 0
    for _ in range(n_bin):
        (bin_id,) = struct.unpack_from("<I", data, at)
        at += 4 + (8 if loffset else 0)
        (n_chunk,) = struct.unpack_from("<i", data, at)
        at += 4
        if bin_id == pseudo and n_chunk == 2:
            mapped, unmapped = struct.unpack_from("<QQ", data, at + 16)
            records += mapped + unmapped
        at += 16 * n_chunk
    return records, at


def _no_coordinate(data: bytes, at: int) -> int:
    return struct.unpack_from("<Q", data, at)[0] if len(data) >= at + 8 else 0


def _tbi_records(data: bytes) -> int:
    n_ref, *_, l_nm = struct.unpack_from("<8i", data, 4)
    at = 4 + 32 + l_nm
    total = 0
    for _ in range(n_ref):
        records, at = _bins(data, at, _TBI_PSEUDO_BIN, loffset=False)
        total += records
        (n_intv,) = struct.unpack_from("<i", data, at)
        at += 4 + 8 * n_intv
    return total + _no_coordinate(data, at)


def _csi_records(data: bytes) -> int:
    _min_shift, depth, l_aux = struct.unpack_from("<3i", data, 4)
    at = 16 + l_aux
    (n_ref,) = struct.unpack_from("<i", data, at)
    at += 4
    pseudo = ((1 << ((depth + 1) * 3)) - 1) // 7 + 1
    total = 0
    for _ in range(n_ref):
        records, at = _bins(data, at, pseudo, loffset=True)
        total += records
    return total + _no_coordinate(data, at)
