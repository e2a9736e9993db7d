"""The tokenizer benchmark's peer (the official per-chunk algorithm) agrees with hexamer."""

from __future__ import annotations

from hexamer.bench.tokenizer import (
    per_chunk_loop_decode,
    per_chunk_loop_encode,
    random_dna,
    run_tokenizer_bench,
)
from hexamer.tokenizer import CarbonTokenizer


def test_peer_agrees(tok: CarbonTokenizer) -> None:
    seq = random_dna(1003, seed=5) + "NN"
    ids = per_chunk_loop_encode(seq, tok.kmer_start, tok.oov_token_id)
    assert ids == tok.encode_dna(seq, tags=False).tolist()
    clean = random_dna(600, seed=6)
    assert per_chunk_loop_decode(tok.encode_dna(clean, tags=False).tolist(), tok.kmer_start) == clean


def test_rows_and_ratios(tok: CarbonTokenizer) -> None:
    rows = run_tokenizer_bench(tok, [1200], repeats=1)
    assert len(rows) == 6
    peers = [r for r in rows if r.implementation.startswith("per-chunk")]
    assert all(r.ratio_vs_peer == 1.0 for r in peers)
    assert all(r.ratio_vs_peer is not None for r in rows)
