"""Build Genome-NIAH cells from a genome FASTA, in the public dataset's schema (``evals.md`` §5).

One row = a real-genome haystack with a random 24 bp KEY immediately followed by a random 24 bp
VALUE planted at a chosen depth, then KEY again at the end; the model must continue with VALUE.
The ``neardup_dX`` tasks add 8 decoy (KEY', VALUE') pairs whose keys differ from KEY at exactly X
positions (distinct from each other and from KEY), placed at random elsewhere in the haystack.

Layout choices (the public generator is not published; these are ours, and documented):

* **Length.** A cell of L tokens holds prompts of ``6 * (L - 1 - ceil(value/6))`` bp, so
  ``<dna>`` + prompt + VALUE is exactly L tokens: a model with an L-token window runs it.
  Every length is a multiple of 6, so the planted pair and the query KEY start on 6-mer
  boundaries (they tokenize as the same 6-mers), and the likelihood of VALUE's tokens lines up.
* **Depth** d: the planted pair starts at ``round(d * (H - 48) / 6) * 6`` where H is the
  haystack length (prompt minus the query KEY); 0 = the haystack's first base, 1 = right before the
  query. Rows cycle through the depths.
* **Haystack.** Contexts below ``stitch_from`` (32k tokens) use one contiguous window of an
  A/C/G/T-only run of the genome (soft-masked bases upper-cased); longer ones are "stitched": runs
  of at least ``min_run`` bp are concatenated in genome order from a random start (wrapping), as
  long genomic windows without ``N`` are rare. Rows cycle through the FASTA files given.
* **Negative** (for the likelihood diagnostic): the prompt + a fresh random 24 bp value.
* Random draws come from ``numpy.random.default_rng([seed, crc32(cell), row])``: a cell is fully
  determined by the seed, and its first rows do not depend on ``n``.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hexamer.batching import batched
from hexamer.evals.tasks.niah_cells import DIFFICULTIES, cell_name, parse_ctx

__all__ = [
    "DEFAULT_GENOME",
    "Genome",
    "NiahBuildConfig",
    "build_cell",
    "build_niah",
    "hamming",
    "load_genome",
    "prompt_length_bp",
]

DEFAULT_GENOME = Path(__file__).resolve().parents[1] / "data" / "dna" / "human_chr20.fa.gz"
BASES = "ACGT"
_PREFIX_TOKENS = 1  # "<dna>"


def hamming(a: str, b: str) -> int:
    """Number of positions where two equal-length strings differ."""
    if len(a) != len(b):
        raise ValueError(f"hamming distance needs equal lengths, got {len(a)} and {len(b)}")
    return sum(x != y for x, y in zip(a, b, strict=True))


def prompt_length_bp(ctx_tokens: int, value_len: int = 24, k: int = 6) -> int:
    """Prompt length so that ``<dna>`` + prompt + value is exactly ``ctx_tokens`` tokens."""
    return k * (ctx_tokens - _PREFIX_TOKENS - math.ceil(value_len / k))


@dataclass
class Genome:
    """A FASTA's records (upper case) and its A/C/G/T-only runs ``(record, start, end)``."""

    path: str
    names: list[str]
    seqs: list[str]
    runs: list[tuple[int, int, int]]

    @property
    def acgt_bp(self) -> int:
        return sum(e - s for _, s, e in self.runs)


def _acgt_runs(seq: str) -> Iterator[tuple[int, int]]:
    arr = np.frombuffer(seq.encode("ascii", "replace"), dtype=np.uint8)
    ok = np.isin(arr, np.frombuffer(BASES.encode(), dtype=np.uint8))
    if not ok.size:
        return
    edges = np.flatnonzero(np.diff(np.concatenate([[0], ok.astype(np.int8), [0]])))
    for s, e in zip(edges[::2], edges[1::2], strict=True):
        yield int(s), int(e)


def load_genome(path: str | Path) -> Genome:
    """Read every record of a (gzipped) FASTA with pysam; upper-case it and index its ACGT runs."""
    import pysam

    names: list[str] = []
    seqs: list[str] = []
    runs: list[tuple[int, int, int]] = []
    with pysam.FastxFile(str(path)) as fx:
        for rec in fx:
            seq = (rec.sequence or "").upper()
            if not seq:
                continue
            idx = len(seqs)
            names.append(rec.name)
            seqs.append(seq)
            runs.extend((idx, s, e) for s, e in _acgt_runs(seq))
    if not runs:
        raise ValueError(f"{path}: no A/C/G/T sequence found (is it a FASTA file?)")
    return Genome(str(path), names, seqs, runs)


@dataclass(frozen=True)
class NiahBuildConfig:
    """What ``hexamer build-niah`` builds; the defaults are the public benchmark's design."""

    ctx: tuple[int, ...] = (4096, 8192)
    tasks: tuple[str, ...] = DIFFICULTIES
    n: int = 500
    seed: int = 42
    depths: tuple[float, ...] = (0.10, 0.25, 0.50, 0.75, 0.90)
    key_len: int = 24
    value_len: int = 24
    n_distractors: int = 8
    stitch_from: int = 32768
    min_run: int = 1000
    k: int = 6
    fasta: tuple[str, ...] = field(default_factory=lambda: (str(DEFAULT_GENOME),))

    def __post_init__(self) -> None:
        for name in ("key_len", "value_len"):
            v = getattr(self, name)
            if v < self.k or v % self.k:
                raise ValueError(f"{name} must be a positive multiple of {self.k}, got {v}")
        if self.n < 1:
            raise ValueError(f"n must be >= 1, got {self.n}")
        if not self.depths or any(not 0.0 <= d <= 1.0 for d in self.depths):
            raise ValueError(f"depths must be fractions in [0, 1], got {list(self.depths)}")
        for t in self.tasks:
            _distance(t)
        if not self.ctx:
            raise ValueError("give at least one context length")
        if self.n_distractors < 0:
            raise ValueError(f"n_distractors must be >= 0, got {self.n_distractors}")


def _distance(task: str) -> int:
    """Hamming distance of the decoy keys (0 for the plain task)."""
    if task == "niah":
        return 0
    if task.startswith("neardup_d") and task[len("neardup_d") :].isdigit():
        d = int(task[len("neardup_d") :])
        if d >= 1:
            return d
    raise ValueError(
        f"unknown NIAH task {task!r}: use niah or neardup_dX (X >= 1, e.g. {', '.join(DIFFICULTIES)})"
    )


def _random_dna(rng: np.random.Generator, n: int) -> str:
    return "".join(BASES[i] for i in rng.integers(0, 4, n))


def _near_key(rng: np.random.Generator, key: str, distance: int) -> str:
    chars = list(key)
    for pos in rng.choice(len(key), size=distance, replace=False):
        chars[pos] = BASES[(BASES.index(chars[pos]) + int(rng.integers(1, 4))) % 4]
    return "".join(chars)


def _contiguous(rng: np.random.Generator, genome: Genome, length: int) -> tuple[str, str]:
    fits = [(r, s, e) for r, s, e in genome.runs if e - s >= length]
    if not fits:
        longest = max(e - s for _, s, e in genome.runs)
        raise ValueError(
            f"{genome.path}: no A/C/G/T run of {length:,} bp for a contiguous haystack (longest is {longest:,} bp); "
            "pass a larger genome with --fasta or lower --stitch-from"
        )
    weights = np.array([e - s - length + 1 for _, s, e in fits], dtype=np.float64)
    j = int(rng.choice(len(fits), p=weights / weights.sum()))
    r, s, _ = fits[j]
    start = s + int(rng.integers(0, int(weights[j])))
    return genome.seqs[r][start : start + length], f"{genome.names[r]}:{start + 1}-{start + length}"


def _stitched(rng: np.random.Generator, genome: Genome, length: int, min_run: int) -> tuple[str, str]:
    runs = [(r, s, e) for r, s, e in genome.runs if e - s >= min_run]
    total = sum(e - s for _, s, e in runs)
    if total < length:
        raise ValueError(
            f"{genome.path}: only {total:,} bp in A/C/G/T runs of >= {min_run} bp, a stitched haystack needs "
            f"{length:,}; pass a larger genome with --fasta"
        )
    sizes = np.array([e - s for _, s, e in runs], dtype=np.float64)
    i = int(rng.choice(len(runs), p=sizes / sizes.sum()))
    r, s, e = runs[i]
    at = s + int(rng.integers(0, e - s))
    pieces: list[str] = []
    got = 0
    first = f"{genome.names[r]}:{at + 1}"
    n_runs = 0
    while got < length:
        r, s, e = runs[i]
        piece = genome.seqs[r][at : min(e, at + length - got)]
        pieces.append(piece)
        got += len(piece)
        n_runs += 1
        i = (i + 1) % len(runs)
        at = runs[i][1]
    return "".join(pieces), f"stitched from {first}, {n_runs} run(s)"


def _layout(
    rng: np.random.Generator, hay_units: int, seg_units: int, n_dist: int, depth: float
) -> tuple[int, list[int], list[int]]:
    """Unit (6 bp) start of the needle, and the background offsets where decoys are inserted
    before and after it, so that the needle lands exactly at ``depth`` of the haystack."""
    background = hay_units - seg_units * (1 + n_dist)
    p = round(depth * (hay_units - seg_units))
    lo = max(0, math.ceil((p - background) / seg_units))
    hi = min(n_dist, p // seg_units)
    if lo > hi:  # depth unreachable with this many decoys (tiny haystacks): nearest feasible
        lo = hi = min(n_dist, max(0, p // seg_units))
    share = p / max(1, hay_units - seg_units)
    n_before = int(np.clip(rng.binomial(n_dist, share), lo, hi))
    bg_before = p - seg_units * n_before
    if not 0 <= bg_before <= background:
        bg_before = min(max(bg_before, 0), background)
    bg_after = background - bg_before
    before = sorted(int(x) for x in rng.integers(0, bg_before + 1, n_before))
    after = sorted(int(x) for x in rng.integers(0, bg_after + 1, n_dist - n_before))
    return bg_before + seg_units * n_before, before, after


def _assemble(background: str, inserts: list[tuple[int, str]]) -> tuple[str, list[int]]:
    """``background`` with each ``(offset, segment)`` inserted at its background offset (sorted by
    offset), and where each segment starts in the result."""
    out: list[str] = []
    starts: list[int] = []
    last = 0
    shift = 0
    for offset, seg in inserts:
        out.append(background[last:offset])
        starts.append(offset + shift)
        out.append(seg)
        shift += len(seg)
        last = offset
    out.append(background[last:])
    return "".join(out), starts


def _row(cfg: NiahBuildConfig, genome: Genome, task: str, ctx_tokens: int, row: int) -> dict[str, Any]:
    config = cell_name(task, ctx_tokens)
    rng = np.random.default_rng([cfg.seed, zlib.crc32(config.encode()), row])
    k = cfg.k
    dist = _distance(task)
    n_dist = cfg.n_distractors if dist else 0
    prompt_bp = prompt_length_bp(ctx_tokens, cfg.value_len, k)
    hay_bp = prompt_bp - cfg.key_len
    seg = cfg.key_len + cfg.value_len
    if hay_bp < seg * (1 + n_dist):
        raise ValueError(
            f"{config}: a {ctx_tokens}-token context holds a {hay_bp} bp haystack, too short for "
            f"{1 + n_dist} planted pair(s) of {seg} bp"
        )
    bg_len = hay_bp - seg * (1 + n_dist)
    depth = cfg.depths[row % len(cfg.depths)]
    for _attempt in range(100):
        if ctx_tokens >= cfg.stitch_from:
            background, source = _stitched(rng, genome, bg_len, cfg.min_run)
            kind = "stitched"
        else:
            background, source = _contiguous(rng, genome, bg_len)
            kind = "contiguous"
        key = _random_dna(rng, cfg.key_len)
        value = _random_dna(rng, cfg.value_len)
        keys: list[str] = []
        while len(keys) < n_dist:
            cand = _near_key(rng, key, dist)
            if cand != key and cand not in keys:
                keys.append(cand)
        values = []
        while len(values) < n_dist:
            cand = _random_dna(rng, cfg.value_len)
            if cand != value and cand not in values:
                values.append(cand)
        negative = value
        while negative == value or negative in values:
            negative = _random_dna(rng, cfg.value_len)
        unit = k
        needle_units, before, after = _layout(rng, hay_bp // unit, seg // unit, n_dist, depth)
        order = rng.permutation(n_dist).tolist()
        pairs = [keys[j] + values[j] for j in order]
        bg_before = needle_units * unit - seg * len(before)
        # (background offset, segment, decoy index or -1 for the needle); before-decoys are drawn
        # at offsets <= bg_before and after-decoys >= it, and the stable sort keeps that order
        inserts = [(o * unit, pairs[i], i) for i, o in enumerate(before)]
        inserts.append((bg_before, key + value, -1))
        inserts += [
            (bg_before + o * unit, pairs[len(before) + i], len(before) + i) for i, o in enumerate(after)
        ]
        inserts.sort(key=lambda t: t[0])
        haystack, starts = _assemble(background, [(o, sq) for o, sq, _ in inserts])
        prompt = haystack + key
        at = {tag: pos for (_, _, tag), pos in zip(inserts, starts, strict=True)}
        assert at[-1] == needle_units * unit
        # the key must occur exactly twice (planted + query): nowhere in the genome or across joins
        if prompt.count(key) == 2 and prompt.find(key) == at[-1]:
            break
    else:  # pragma: no cover - needs astronomically unlucky draws
        raise RuntimeError(f"{config} row {row}: could not plant a unique key in 100 attempts")
    dpos = [at[i] for i in range(n_dist)]
    return {
        "uid": f"{config}_{row:06d}",
        "task": task,
        "prompt": prompt,
        "value": value,
        "value_len_bp": cfg.value_len,
        "context_length_tokens": ctx_tokens,
        "positive_sequence": prompt + value,
        "negative_sequence": prompt + negative,
        "key": key,
        "depth": float(depth),
        "needle_pos_bp": needle_units * unit,
        "hamming": dist,
        "distractor_keys": [keys[j] for j in order],
        "distractor_values": [values[j] for j in order],
        "distractor_pos_bp": dpos,
        "haystack": kind,
        "source": source,
        "source_file": Path(genome.path).name,
        "seed": cfg.seed,
    }


def build_cell(
    cfg: NiahBuildConfig, genomes: Sequence[Genome], task: str, ctx_tokens: int
) -> Iterator[dict[str, Any]]:
    """The ``cfg.n`` rows of one cell (rows cycle through ``genomes``)."""
    for i in range(cfg.n):
        yield _row(cfg, genomes[i % len(genomes)], task, ctx_tokens, i)


def _schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            ("uid", pa.string()),
            ("task", pa.string()),
            ("prompt", pa.large_string()),
            ("value", pa.string()),
            ("value_len_bp", pa.int64()),
            ("context_length_tokens", pa.int64()),
            ("positive_sequence", pa.large_string()),
            ("negative_sequence", pa.large_string()),
            ("key", pa.string()),
            ("depth", pa.float64()),
            ("needle_pos_bp", pa.int64()),
            ("hamming", pa.int64()),
            ("distractor_keys", pa.list_(pa.string())),
            ("distractor_values", pa.list_(pa.string())),
            ("distractor_pos_bp", pa.list_(pa.int64())),
            ("haystack", pa.string()),
            ("source", pa.string()),
            ("source_file", pa.string()),
            ("seed", pa.int64()),
        ]
    )


def build_niah(cfg: NiahBuildConfig, out: str | Path, *, row_group: int = 16) -> list[Path]:
    """Write ``out/niah_{task}_{L}/test.parquet`` for every task x context, and ``out/manifest.json``.

    Each file is written to a temporary name and renamed when complete.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from hexamer.io import atomic_path

    genomes = [load_genome(p) for p in cfg.fasta]
    out = Path(out)
    written: list[Path] = []
    schema = _schema()
    cells = []
    for ctx_tokens in cfg.ctx:
        for task in cfg.tasks:
            config = cell_name(task, ctx_tokens)
            path = out / config / "test.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(path) as tmp, pq.ParquetWriter(str(tmp), schema, compression="zstd") as writer:
                for chunk in batched(build_cell(cfg, genomes, task, ctx_tokens), row_group):
                    writer.write_table(pa.Table.from_pylist(chunk, schema=schema))
            written.append(path)
            cells.append(
                {
                    "config": config,
                    "task": task,
                    "context_length_tokens": ctx_tokens,
                    "rows": cfg.n,
                    "prompt_bp": prompt_length_bp(ctx_tokens, cfg.value_len, cfg.k),
                    "haystack": "stitched" if ctx_tokens >= cfg.stitch_from else "contiguous",
                    "file": str(path.relative_to(out)),
                }
            )
    manifest = {
        "builder": "hexamer build-niah",
        "config": asdict(cfg),
        "cells": cells,
        "genomes": [{"path": g.path, "records": len(g.seqs), "acgt_bp": g.acgt_bp} for g in genomes],
    }
    with atomic_path(out / "manifest.json") as tmp:
        Path(tmp).write_text(json.dumps(manifest, indent=2))
    return written


def parse_list(text: str, what: str) -> list[str]:
    """Comma-separated values, blanks dropped."""
    items = [t.strip() for t in str(text).split(",") if t.strip()]
    if not items:
        raise ValueError(f"no {what} given")
    return items


def parse_ctx_list(text: str) -> tuple[int, ...]:
    """``"4k,8k"`` -> (4096, 8192)."""
    return tuple(parse_ctx(t) for t in parse_list(text, "context lengths"))


def parse_depths(text: str) -> tuple[float, ...]:
    """``"10,25,50"`` (percent) or ``"0.1,0.25"`` (fractions) -> fractions."""
    values = [float(t) for t in parse_list(text, "depths")]
    if any(v > 1 for v in values):
        values = [v / 100 for v in values]
    return tuple(values)
