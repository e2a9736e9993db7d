"""llama.cpp as a scorer: bp-level log-likelihoods of DNA from its logits, through hexamer's own
FNS scoring, so its numbers mean exactly what ``Carbon.score(level="bp")`` means.

The prompt is built the way ``Carbon.score`` builds it (``<dna>`` then the 6-mer ids, no BOS) from
hexamer's tokenizer (the parity gate shows llama.cpp's ids are the same); llama.cpp computes the
logits of the 4,096 6-mer rows at every position, :func:`hexamer.fns.score_bases` turns them into
per-base log-probabilities.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from hexamer.bench.llamacpp.backend import LlamaCppBackend


def llama_cpp_per_base(backend: LlamaCppBackend, sequences: Sequence[str]) -> list[np.ndarray]:
    """Per-base log P(base) (FNS, NaN for bases in ``<oov>`` chunks), one array of
    ``len(sequence)`` per sequence, from llama.cpp's logits of each whole sequence."""
    import torch

    from hexamer.backend.results import per_base_values
    from hexamer.fns import score_bases
    from hexamer.tokenizer.dna import encode_dna

    layout = backend.layout
    out: list[np.ndarray] = []
    for seq in sequences:
        dna = encode_dna(seq, layout)
        n = len(dna.ids)
        logits = backend.prompt_logits(
            [layout.begin_id, *dna.ids.tolist()], vocab_rows=(layout.kmer_start, layout.kmer_stop)
        )
        n_real = dna.n_real.astype(np.int64)
        targets = np.where(n_real > 0, dna.ids - layout.kmer_start, 0)
        s = score_bases(torch.from_numpy(logits[:n]), torch.from_numpy(targets), torch.from_numpy(n_real))
        out.append(per_base_values(s, len(seq)))  # as Carbon.score keeps it
    return out
