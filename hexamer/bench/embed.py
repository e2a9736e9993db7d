"""``hexamer bench embed`` in Python: :func:`hexamer.embed.embed_sequences` against ``transformers``
on the same weights (mean-pooled last layer), timed and compared vector by vector."""

from __future__ import annotations

from pathlib import Path

from hexamer.bench.common import BenchOptionError, bench_model_folder
from hexamer.bench.report import BenchReport
from hexamer.bench.timing import best_of
from hexamer.cache import cache_root

__all__ = ["run_embed_bench"]


def run_embed_bench(
    *,
    model: str | None = None,
    shape: str = "tiny",
    n_seqs: int = 64,
    length: int = 1200,
    batch_size: int = 8,
    dtype: str = "float32",
    repeats: int = 1,
    quick: bool = False,
) -> BenchReport:
    """Mean-pooled final-layer embeddings of random DNA: hexamer vs ``transformers`` (right-padded
    batches, ``last_hidden_state`` averaged over the 6-mer positions); vectors compared."""
    import numpy as np
    import torch

    from hexamer.bench.tokenizer import random_dna
    from hexamer.carbon import Carbon
    from hexamer.embed import embed_sequences
    from hexamer.synthetic import SHAPES

    if model is None and shape not in SHAPES:
        raise BenchOptionError(f"--shape must be one of {sorted(SHAPES)}")
    if quick:
        n_seqs, length = min(n_seqs, 8), min(length, 600)
    folder = model or str(bench_model_folder(shape, cache_root(), dtype))
    carbon = Carbon.from_pretrained(folder, dtype=dtype)
    seqs = [random_dna(length, seed=i) for i in range(n_seqs)]

    def ours() -> np.ndarray:
        items = embed_sequences(carbon, seqs, pool="mean", layer=-1, batch_size=batch_size)
        return np.stack([v for _, v in items])

    rows: list[dict] = []
    results: dict[str, np.ndarray] = {}

    def timed(name: str, fn) -> None:
        best, results[name] = best_of(fn, repeats)
        rows.append({"backend": name, "sequences": n_seqs, "seconds": best, "sequences/s": n_seqs / best})

    timed("hexamer", ours)
    try:
        import transformers
    except ImportError:
        transformers = None
    if transformers is not None:
        transformers.utils.logging.disable_progress_bar()
        hf = transformers.LlamaModel.from_pretrained(folder, dtype=getattr(torch, dtype)).eval()
        lay = carbon.layout
        content = [carbon.tokenizer.encode_dna(s, tags=False).tolist() for s in seqs]

        @torch.inference_mode()
        def peer() -> np.ndarray:
            out = []
            for start in range(0, n_seqs, batch_size):
                group = content[start : start + batch_size]
                width = max(len(c) for c in group) + 2
                ids = torch.zeros((len(group), width), dtype=torch.int64)
                mask = torch.zeros((len(group), width), dtype=torch.int64)
                for i, c in enumerate(group):
                    row = [lay.begin_id, *c, lay.end_id]
                    ids[i, : len(row)] = torch.tensor(row)
                    mask[i, : len(row)] = 1
                h = hf(input_ids=ids, attention_mask=mask).last_hidden_state.float()
                for i, c in enumerate(group):
                    out.append(h[i, 1 : 1 + len(c)].mean(0).numpy())
            return np.stack(out)

        timed("transformers", peer)
    base = next((r for r in rows if r["backend"] == "transformers"), None)
    for r in rows:
        r["× transformers"] = base["seconds"] / r["seconds"] if base else None
    if base is not None:
        rows[0]["max abs diff"] = float(np.abs(results["hexamer"] - results["transformers"]).max())
    report = BenchReport(
        name="embed",
        title=f"embeddings, {n_seqs} × {length} bp, mean pool, last layer ({Path(folder).name}, {dtype})",
        columns=["backend", "sequences", "seconds", "sequences/s", "× transformers", "max abs diff"],
        rows=rows,
        formats={
            "seconds": "{:.2f}",
            "sequences/s": "{:,.1f}",
            "× transformers": "{:.2f}×",
            "max abs diff": "{:.1e}",
        },
    )
    if transformers is None:
        report.notes.append("transformers is not installed: peer skipped (pip install 'hexamer[hf]')")
    return report
