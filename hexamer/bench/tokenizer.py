"""DNA encode/decode throughput of the tokenizer, against a per-chunk Python loop in the same run.

The peer is the algorithm of the official ``HybridDNATokenizer`` (a Python loop over 6-base chunks
with a dict lookup), restated here because the original needs remote code and the hub. Throughput is
the best of ``repeats`` runs (machines are noisy; the best run is the least disturbed one).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from hexamer.bench.report import BenchReport
from hexamer.bench.timing import best_of
from hexamer.tokenizer import CarbonTokenizer


@dataclass
class TokenizerBenchRow:
    operation: str
    implementation: str
    n_bp: int
    seconds: float
    mbp_per_s: float
    ratio_vs_peer: float | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def random_dna(n_bp: int, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    return np.frombuffer(b"ACGT", dtype=np.uint8)[rng.integers(0, 4, n_bp)].tobytes().decode("ascii")


def per_chunk_loop_encode(seq: str, kmer_start: int, oov_id: int) -> list[int]:
    """The official tokenizer's way: upper-case, then a Python loop over 6-base chunks."""
    table = _kmer_table(kmer_start)
    seq = seq.upper()
    out = []
    for i in range(0, len(seq), 6):
        chunk = seq[i : i + 6]
        if len(chunk) < 6:
            chunk = chunk + "A" * (6 - len(chunk))
        out.append(table.get(chunk, oov_id))
    return out


def per_chunk_loop_decode(ids: list[int], kmer_start: int) -> str:
    kmers = list(_kmer_table(kmer_start))
    return "".join(kmers[i - kmer_start] for i in ids)


_TABLES: dict[int, dict[str, int]] = {}


def _kmer_table(kmer_start: int) -> dict[str, int]:
    if kmer_start not in _TABLES:
        _TABLES[kmer_start] = {
            "".join(p): kmer_start + i for i, p in enumerate(itertools.product("ATCG", repeat=6))
        }
    return _TABLES[kmer_start]


def run_tokenizer_bench(
    tokenizer: CarbonTokenizer,
    sizes: list[int],
    repeats: int = 3,
    peer_max_bp: int = 10_000_000,
) -> list[TokenizerBenchRow]:
    """Encode and decode throughput at each size; the per-chunk peer runs up to ``peer_max_bp``."""
    rows: list[TokenizerBenchRow] = []
    layout = tokenizer.layout
    for n in sizes:
        seq = random_dna(n)
        tagged = f"<dna>{seq}</dna>"
        kmers = tokenizer.encode_dna(seq, tags=False)
        with_tags = tokenizer.encode_dna(seq)
        assert tokenizer.decode_dna(kmers, n_bases=n) == seq
        cases: list[tuple[str, str, Callable[[], object]]] = [
            ("encode", "hexamer encode_dna (numpy)", lambda s=seq: tokenizer.encode_dna(s)),
            ("encode", "hexamer encode (full rules, list out)", lambda t=tagged: tokenizer.encode(t)),
            ("decode", "hexamer decode_dna (numpy)", lambda k=kmers: tokenizer.decode_dna(k)),
            ("decode", "hexamer decode (full rules)", lambda w=with_tags: tokenizer.decode(w)),
        ]
        peer_rows: dict[str, float] = {}
        if n <= peer_max_bp:
            kmer_list = kmers.tolist()
            if per_chunk_loop_encode(seq, layout.kmer_start, layout.oov_id) != kmer_list:
                raise AssertionError("per-chunk peer and hexamer disagree; benchmark aborted")
            cases += [
                (
                    "encode",
                    "per-chunk Python loop (official algorithm)",
                    lambda s=seq: per_chunk_loop_encode(s, layout.kmer_start, layout.oov_id),
                ),
                (
                    "decode",
                    "per-chunk Python loop (official algorithm)",
                    lambda k=kmer_list: per_chunk_loop_decode(k, layout.kmer_start),
                ),
            ]
        measured = []
        for op, impl, fn in cases:
            seconds, _ = best_of(fn, repeats if n <= 10_000_000 else 1)
            measured.append(TokenizerBenchRow(op, impl, n, seconds, n / seconds / 1e6))
            if impl.startswith("per-chunk"):
                peer_rows[op] = seconds
        for row in measured:
            if row.operation in peer_rows:
                row.ratio_vs_peer = peer_rows[row.operation] / row.seconds
        rows.extend(measured)
    return rows


def tokenizer_report(rows: list[TokenizerBenchRow], repeats: int) -> BenchReport:
    """The rows as the shared table (JSON/Markdown/PNG)."""
    return BenchReport(
        name="tokenizer",
        title=f"tokenizer throughput (best of {repeats}; single thread)",
        columns=("op", "implementation", "bp", "seconds", "Mbp/s", "× per-chunk loop"),
        rows=[
            {
                **r.as_dict(),
                "op": r.operation,
                "implementation": r.implementation,
                "bp": r.n_bp,
                "Mbp/s": r.mbp_per_s,
                "× per-chunk loop": r.ratio_vs_peer,
            }
            for r in rows
        ],
        formats={"bp": "{:,}", "seconds": "{:.4f}", "Mbp/s": "{:,.1f}", "× per-chunk loop": "{:.1f}×"},
    )
