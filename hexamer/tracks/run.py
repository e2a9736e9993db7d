"""``hexamer track``'s job: per-base tracks of a FASTA region (or the whole FASTA) into files.

Each region is read as one sequence starting at its first base (so its 6-mers are cut from the
region start) through the strided sliding window of :mod:`hexamer.tracks.windows`; one window at
a time is fetched from the FASTA, scored with the model's public ``base_logprobs`` and written,
so memory stays bounded on whole chromosomes. A window whose kept bases are all unscored (an N
run) costs no forward: windows are independent, so skipping it changes no value. A window whose
model output is NaN or infinite is ``failed``: its bases are left out of the files (never written
as numbers), counted in ``bases_failed`` and named in ``failures``; the other windows go on.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from hexamer.model.finite import NonFiniteOutputError
from hexamer.tracks.hub import write_hub
from hexamer.tracks.regions import Region, parse_regions, whole_reference
from hexamer.tracks.values import track_names, track_values
from hexamer.tracks.windows import check_stride, plan_windows, scored_bases, window_capacity
from hexamer.tracks.writers import FORMATS, import_pybigwig, track_writer

__all__ = [
    "TrackBlock",
    "TrackRunResult",
    "default_stride",
    "iter_blocks",
    "read_regions",
    "run_tracks",
    "window_plan",
]

_NOT_ACGT = re.compile(r"[^ACGT]")


@dataclass
class TrackBlock:
    """Per-base log-probabilities (``(n, 4)``, A C G T, NaN rows unscored) of ``ref`` at
    ``contig:start`` (0-based), and the DNA tokens of the forward that produced them (0: none);
    ``failed``: why the window has no values (the model's output was not finite), else None."""

    contig: str
    start: int
    ref: str
    logprobs: np.ndarray
    forward_tokens: int = 0
    failed: str | None = None


@dataclass
class TrackRunResult:
    files: list[Path]
    regions: list[Region]
    n_bases: int
    n_scored: int
    seconds: float
    window: int
    stride: int
    n_windows: int
    forward_tokens: list[int] = field(default_factory=list)
    #: bases of failed windows (absent from the files), failed windows, and the first ten of them
    n_failed: int = 0
    failures: list[str] = field(default_factory=list)
    n_failed_windows: int = 0

    @property
    def n_absent(self) -> int:
        """Bases absent from the files for what they are (N or ``<oov>`` 6-mers), failed ones apart."""
        return self.n_bases - self.n_scored - self.n_failed

    @property
    def bp_per_s(self) -> float:
        return self.n_bases / self.seconds if self.seconds > 0 else float("nan")

    def summary(self) -> dict[str, Any]:
        return {
            "files": [str(p) for p in self.files],
            "regions": [str(r) for r in self.regions],
            "bases": self.n_bases,
            "bases_scored": self.n_scored,
            "bases_absent": self.n_absent,
            "bases_failed": self.n_failed,
            "windows_failed": self.n_failed_windows,
            "failures": self.failures,
            "windows": self.n_windows,
            "forwards": len(self.forward_tokens),
            "window_bp": self.window,
            "stride_bp": self.stride,
            "seconds": round(self.seconds, 3),
            "bp_per_s": round(self.bp_per_s, 1),
        }


def read_regions(fasta: str | os.PathLike[str], regions: Sequence[str] | None) -> list[Region]:
    """The regions as they will be tracked (every contig when none is given), checked against the
    FASTA; cheap to call before loading a model (the prepared FASTA is reused by the run)."""
    from hexamer.io.reference import Reference

    with Reference(fasta) as ref:
        chosen = parse_regions(regions, ref.lengths, ref.resolve) if regions else whole_reference(ref.lengths)
    if not chosen:
        raise ValueError(f"{fasta}: no contig with bases")
    return chosen


def default_stride(window: int, k: int) -> int:
    """Half the window, on a k-mer boundary (each base then sees at least half a window)."""
    return max(k, window // 2 // k * k)


def window_plan(model: Any, *, window: int | None, stride: int | None, prefix: str = "") -> tuple[int, int]:
    """``(window, stride)`` in bases, checked: window defaults to the whole context (less prefix
    and ``<dna>``), stride to half of it."""
    k = model.layout.k
    capacity = window_capacity(model, prefix) * k
    if capacity < k:
        raise ValueError("the prefix leaves no room for DNA in the model's context")
    if window is None:
        window = capacity
    if window < k or window % k or window > capacity:
        raise ValueError(
            f"window must be a multiple of {k} bases between {k} and {capacity:,} (the model's context "
            f"less prefix and <dna>), got {window:,}"
        )
    stride = default_stride(window, k) if stride is None else stride
    check_stride(stride, window, k)
    return window, stride


def iter_blocks(
    model: Any,
    fetch: Callable[[str, int, int], str],
    regions: Sequence[Region],
    *,
    window: int,
    stride: int,
    method: Literal["fns", "exact"] = "fns",
    prefix: str = "",
) -> Iterator[TrackBlock]:
    """One block per window (its kept bases), region by region, in order."""
    k = model.layout.k
    for region in regions:
        for win in plan_windows(len(region), k=k, window_tokens=window // k, stride_tokens=stride // k):
            text = _NOT_ACGT.sub(
                "N", fetch(region.contig, region.start + win.start, region.start + win.end).upper()
            )
            if len(text) != win.end - win.start:
                raise ValueError(f"{region}: the FASTA returned {len(text)} bases for {win.end - win.start}")
            keep = slice(win.keep_start - win.start, win.keep_end - win.start)
            scored = scored_bases(text, k)[keep]
            lp = np.full((win.keep_end - win.keep_start, 4), np.nan, dtype=np.float32)
            tokens = 0
            failed = None
            if scored.any():
                tokens = -(-len(text) // k)
                try:
                    lp = model.base_logprobs(text, method=method, prefix=prefix)[keep].copy()
                except NonFiniteOutputError as exc:  # this window fails; the others go on
                    failed = str(exc)
                lp[~scored] = np.nan
            yield TrackBlock(region.contig, region.start + win.keep_start, text[keep], lp, tokens, failed)


@dataclass(frozen=True)
class TrackSettings:
    """The options that decide a track job's files (those of ``hexamer track``), as
    :func:`run_tracks` takes them: the track ``kinds`` and file ``formats``, the windows
    (``window``, ``stride``; None: the model's context, half of it), the ``method`` and prompt
    ``prefix``, and the hub's assembly (``hub_genome``; None: no hub) and contact e-mail."""

    kinds: tuple[str, ...] = ("logprob", "entropy", "llr")
    formats: tuple[str, ...] = ("bigwig",)
    window: int | None = None
    stride: int | None = None
    method: Literal["fns", "exact"] = "fns"
    prefix: str = ""
    hub_genome: str | None = None
    hub_email: str = "unknown@example.org"

    def as_dict(self) -> dict[str, Any]:
        """The keywords of :func:`run_tracks`."""
        return asdict(self)


def run_tracks(
    model: Any,
    fasta: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    regions: Sequence[str] | None = None,
    kinds: Sequence[str] = ("logprob", "entropy", "llr"),
    formats: Sequence[str] = ("bigwig",),
    window: int | None = None,
    stride: int | None = None,
    method: Literal["fns", "exact"] = "fns",
    prefix: str = "",
    hub_genome: str | None = None,
    hub_email: str = "unknown@example.org",
    model_name: str = "model",
    progress: Callable[[int, int], None] | None = None,
) -> TrackRunResult:
    """Write every track of ``kinds`` in every format into ``out_dir`` (created if missing) and,
    with ``hub_genome`` (a UCSC assembly name such as ``hg38``), the track-hub files. Every
    problem with the options, the FASTA or the regions is raised before the first forward."""
    from hexamer.io.reference import Reference

    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        raise ValueError(f"formats must be a non-empty subset of {', '.join(FORMATS)}, got {list(formats)}")
    if hub_genome is not None and "bigwig" not in formats:
        raise ValueError("a track hub needs the bigwig format")
    if "bigwig" in formats:
        import_pybigwig()
    window, stride = window_plan(model, window=window, stride=stride, prefix=prefix)
    names = track_names(kinds)
    out = Path(out_dir)
    with Reference(fasta) as ref:
        chosen = parse_regions(regions, ref.lengths, ref.resolve) if regions else whole_reference(ref.lengths)
        if not chosen:
            raise ValueError(f"{fasta}: no contig with bases")
        out.mkdir(parents=True, exist_ok=True)
        writers = {
            (name, fmt): track_writer(
                fmt,
                out / f"{name}{FORMATS[fmt]}",
                contigs=ref.lengths,
                name=f"hexamer_{name}",
                description=f"hexamer {name} ({model_name})",
            )
            for name in names
            for fmt in formats
        }
        total = sum(len(r) for r in chosen)
        done = scored = n_windows = n_failed = failed_windows = 0
        tokens: list[int] = []
        failures: list[str] = []
        start = time.perf_counter()
        try:
            for block in iter_blocks(
                model, ref.fetch, chosen, window=window, stride=stride, method=method, prefix=prefix
            ):
                values = track_values(block.logprobs, block.ref, kinds)
                for (name, _), writer in writers.items():
                    writer.write(block.contig, block.start, values[name])
                n = len(block.ref)
                done += n
                scored += int((~np.isnan(block.logprobs).any(axis=1)).sum())
                if block.failed is not None:
                    n_failed += n
                    failed_windows += 1
                    if len(failures) < 10:
                        failures.append(f"{block.contig}:{block.start + 1}-{block.start + n}: {block.failed}")
                n_windows += 1
                if block.forward_tokens:
                    tokens.append(block.forward_tokens)
                if progress is not None:
                    progress(done, total)
        except BaseException:
            for writer in writers.values():
                writer.discard()
            raise
        for writer in writers.values():
            writer.commit()
        seconds = time.perf_counter() - start
    files = [w.path for w in writers.values()]
    if hub_genome is not None:
        files += write_hub(out, names, genome=hub_genome, model=model_name, email=hub_email)
    return TrackRunResult(
        files,
        list(chosen),
        total,
        scored,
        seconds,
        window,
        stride,
        n_windows,
        tokens,
        n_failed,
        failures,
        failed_windows,
    )
