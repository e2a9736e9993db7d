"""Resumable variant-effect jobs: a killed run continues, and ends with the output an
uninterrupted run would have written, byte for byte.

While scoring, finished rows go to a sidecar folder next to the output,
``.NAME.hexamer-resume/``: a ``meta.json`` describing the job (settings, input files' size and
mtime, a fingerprint of the model) and ``rows-NNNNNN.parquet`` chunks, each written atomically and
holding whole work units only. On restart with ``resume=True`` the chunks are loaded, units whose
rows are all there are not recomputed, and everything else is computed exactly as before (units
depend only on the input, so batch shapes and numbers are the same). The final output is assembled
from all rows at the end and written atomically; the sidecar is then removed. A sidecar made by a
different job (other settings, inputs or model) is refused rather than mixed in.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hexamer.io import TableWriter, atomic_path
from hexamer.vep.engine import ROW_COLUMNS, VepSettings, iter_blocks
from hexamer.vep.output import VcfWriteResult, output_kind, row_schema, write_vep_output
from hexamer.vep.variants import Reference

if TYPE_CHECKING:
    from hexamer.carbon import Carbon

__all__ = ["ResumeError", "VepRunResult", "model_fingerprint", "run_vep", "sidecar_dir"]

PathLike = str | os.PathLike[str]
_META = "meta.json"
_VERSION = 1


class ResumeError(ValueError):
    """The sidecar of an earlier run cannot be used for this one."""


@dataclass
class VepRunResult:
    """Summary of a finished job: rows per status, rows taken from a checkpoint, the VCF writer's report."""

    output: str
    n_rows: int
    status_counts: dict[str, int] = field(default_factory=dict)
    n_resumed: int = 0
    vcf: VcfWriteResult | None = None
    #: scores of the ``ok`` rows and their variant kinds (snv, mnv, ins, del, ...), for plots
    scores: list[float] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)


def sidecar_dir(output: PathLike) -> Path:
    """The checkpoint folder of an output file."""
    path = Path(output)
    return path.with_name(f".{path.name}.hexamer-resume")


def model_fingerprint(carbon: Carbon) -> str:
    """A short hash of the model's configuration and a few of its weights (not of the folder path)."""
    remote = getattr(carbon, "fingerprint", None)  # hexamer.remote: server, model, top-N
    if remote is not None:
        return str(remote())
    h = hashlib.sha256(repr(carbon.model.config).encode())
    params = list(carbon.model.named_parameters())
    for name, param in params[:: max(1, len(params) // 8)]:
        h.update(name.encode())
        h.update(param.detach().reshape(-1)[:64].float().cpu().numpy().tobytes())
    return h.hexdigest()[:16]


def _file_id(path: PathLike) -> dict[str, Any]:
    st = os.stat(path)
    return {"path": os.path.abspath(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _load_chunks(side: Path) -> tuple[dict[tuple[int, int], dict[str, Any]], int]:
    import pyarrow.parquet as pq

    done: dict[tuple[int, int], dict[str, Any]] = {}
    chunks = sorted(side.glob("rows-*.parquet"))
    for chunk in chunks:
        for row in pq.read_table(chunk).to_pylist():
            done[(row["record"], row["alt_index"])] = row
    return done, len(chunks)


def _write_chunk(side: Path, n: int, rows: list[dict[str, Any]]) -> None:
    with TableWriter(side / f"rows-{n:06d}.parquet", schema=row_schema()) as writer:
        writer.write_batch([{c: r.get(c) for c in ROW_COLUMNS} for r in rows])


def run_vep(
    carbon: Carbon,
    vcf: PathLike,
    fasta: PathLike,
    output: PathLike,
    *,
    resume: bool = False,
    checkpoint_rows: int = 5000,
    checkpoint_seconds: float = 60.0,
    on_progress: Callable[[int], None] | None = None,
    on_note: Callable[[str], None] | None = None,
    **settings: Any,
) -> VepRunResult:
    """Score a VCF into ``output`` (annotated VCF/BCF or a table, by extension) with checkpoints.

    ``settings`` are :class:`~hexamer.vep.engine.VepSettings` fields (``recipe``, ``window``,
    ``context``, ``context_grid``, ``rc_average``, ``batch_size``, ...). Finished rows are
    checkpointed every ``checkpoint_rows`` rows or ``checkpoint_seconds``, whichever comes first.
    Without ``resume`` an old sidecar is discarded and the job starts over; with it, the job
    continues from the sidecar (or starts over when there is none).
    """
    out = Path(output)
    output_kind(out)  # an unsupported extension fails now, not after hours of scoring
    if not out.parent.is_dir():
        raise FileNotFoundError(f"output folder {str(out.parent)!r} does not exist")
    checked = VepSettings(**settings).checked(carbon)
    meta = {
        "version": _VERSION,
        "settings": checked.as_dict(),
        "vcf": _file_id(vcf),
        "fasta": _file_id(fasta),
        "model": model_fingerprint(carbon),
        "output": out.name,
    }
    side = sidecar_dir(out)
    done: dict[tuple[int, int], dict[str, Any]] = {}
    n_chunks = 0
    if side.exists() and resume:
        try:
            old = json.loads((side / _META).read_text())
        except (OSError, ValueError) as exc:
            raise ResumeError(
                f"{side}: unreadable checkpoint ({exc}); remove it or run without resume"
            ) from exc
        if old != meta:
            changed = sorted(k for k in meta if old.get(k) != meta[k])
            raise ResumeError(
                f"{side} was made by a different job (changed: {', '.join(changed)}); "
                "remove it or run without resume to start over"
            )
        done, n_chunks = _load_chunks(side)
    elif side.exists():
        shutil.rmtree(side)
    if not side.exists():
        side.mkdir()
        with atomic_path(side / _META) as tmp:
            tmp.write_text(json.dumps(meta, indent=1))

    rows: dict[tuple[int, int], dict[str, Any]] = dict(done)
    pending: list[dict[str, Any]] = []
    last_flush = time.monotonic()
    with Reference(fasta) as reference:
        for units in iter_blocks(
            carbon, vcf, reference, checked, done=done, on_progress=on_progress, on_note=on_note
        ):
            for unit_rows in units:
                for row in unit_rows:
                    key = (row["record"], row["alt_index"])
                    if key not in done:
                        pending.append(row)
                    rows[key] = row
                if pending and (
                    len(pending) >= checkpoint_rows or time.monotonic() - last_flush >= checkpoint_seconds
                ):
                    _write_chunk(side, n_chunks, pending)
                    n_chunks += 1
                    pending = []
                    last_flush = time.monotonic()
    result = write_vep_output(out, vcf, rows.values(), recipe=checked.recipe)
    shutil.rmtree(side, ignore_errors=True)
    counts = Counter(str(r["status"]) for r in rows.values())
    ok = [r for r in rows.values() if r["status"] == "ok" and r["score"] is not None]
    return VepRunResult(
        output=str(out),
        n_rows=len(rows),
        status_counts=dict(counts),
        n_resumed=len(done),
        vcf=result if isinstance(result, VcfWriteResult) else None,
        scores=[float(r["score"]) for r in ok],
        kinds=[str(r["kind"]) for r in ok],
    )
