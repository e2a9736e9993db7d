"""How far window-recipe VEP scores move with float32 accumulation order and with the float32
full-vocabulary log-softmax a server sends (docs/remote.md, "How close, measured").

    python scripts/remote_agreement.py [MODEL_DIR] [WINDOW_BP]

MODEL_DIR defaults to the cached random-weight 500M bench folder (``hexamer bench fns`` builds
it). For three SNVs of tests/data/vep/chr20_slice.vcf it prints the engine's score (shared
reference prefix, suffix forwards), the naive recipe's (one full forward per window) and the
score from float32 log-softmax values over the whole vocabulary, marginalised in float64 as
``hexamer.remote`` does. Minutes on a 2-core CPU.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pysam
import torch

from hexamer import Carbon
from hexamer.cache import cache_root
from hexamer.fns.likelihood import bp_log_likelihood
from hexamer.vep import recipes, score_variants

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "vep"


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else cache_root() / "bench-500m-qwen3-float32"
    window = int(sys.argv[2]) if len(sys.argv) > 2 else 2400
    m = Carbon.from_pretrained(folder)
    vcf, fasta = DATA / "chr20_slice.vcf", DATA / "chr20_slice.fa.gz"
    rows = [r for r in score_variants(m, vcf, fasta, recipe="window", window=window) if r["status"] == "ok"]
    with pysam.FastaFile(str(fasta)) as fa:
        contig = fa.fetch(fa.references[0]).upper()

    def ll_from_log_softmax(seq: str) -> float:
        ids, start, targets, n_real, _ = m.dna_inputs(seq)
        with torch.inference_mode():
            out = m.model(torch.tensor([ids]), logits_at="all")
        lsm = torch.log_softmax(out.logits[0].float(), dim=-1)  # float32, as a server sends it
        block = lsm[start - 1 : start - 1 + len(targets), m.layout.kmer_start : m.layout.kmer_stop]
        return bp_log_likelihood(block.double(), targets, n_real)

    for r in rows[:3]:
        p0 = r["pos"] - 1
        a, b = recipes.window_bounds(p0, len(r["ref"]), len(contig), window)
        ref_w = contig[a:b]
        alt_w = recipes.alt_window(ref_w, p0 - a, r["ref"], r["alt"])
        naive = recipes.naive_window_score(m, ref_w, alt_w)
        served = ll_from_log_softmax(alt_w) - ll_from_log_softmax(ref_w)
        print(
            f"{r['pos']} {r['ref']}>{r['alt']}: engine {r['score']:.7f} naive {naive:.7f} "
            f"from log-softmax {served:.7f} | engine-naive {r['score'] - naive:.2e} "
            f"naive-served {naive - served:.2e}"
        )


if __name__ == "__main__":
    main()
