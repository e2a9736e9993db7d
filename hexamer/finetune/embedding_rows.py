"""Full fine-tuning trains the embedding rows a DNA input can read, not the whole vocabulary.

A head reads ``<dna>`` + 6-mers + ``</dna>`` (+ padding): about 4,200 ids of Carbon's 155,776.
Training the whole table would, at every step, fill a dense 155,776 x H gradient (640 MB at the
500M shape), run AdamW and the gradient norm over it, and keep two moments of it: work and memory
for rows whose gradient is exactly zero. AdamW is elementwise, so training only the DNA block gives
those rows the same values step for step; the other rows keep their pretrained values instead of
being shrunk by weight decay (which no DNA input could observe). Padding ids outside the block read
the frozen table: padding is masked, so its gradient is zero either way.

The trained rows are a view into the table's storage (``SequenceClassifier.embed_rows``, a
parameter of the classifier, not of the backbone): the optimizer's in-place updates land in the
table itself, so a saved head folder holds the current embedding with no copy back.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from hexamer.finetune.head import SequenceClassifier

__all__ = ["DnaBlockEmbedding", "train_dna_block_only"]


class DnaBlockEmbedding(nn.Embedding):
    """``nn.Embedding`` whose rows ``[start, start + len(rows))`` come from the trained view
    ``rows``; other ids read the (frozen) table. Same state dict as the plain embedding."""

    block: tuple[nn.Parameter, int]

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        rows, start = self.block
        local = ids - start
        inside = (local >= 0) & (local < rows.shape[0])
        x = F.embedding(local.clamp(0, rows.shape[0] - 1), rows)
        if not bool(inside.all()):
            x = torch.where(inside[..., None], x, F.embedding(ids, self.weight))
        return x


def train_dna_block_only(model: SequenceClassifier) -> nn.Parameter:
    """Freeze the embedding table of ``model`` except its DNA block, which becomes the trainable
    parameter ``model.embed_rows`` (a view of the table); returns it."""
    embed = model.backbone.embed_tokens
    if type(embed) is not nn.Embedding:
        raise TypeError(f"expected a plain nn.Embedding, got {type(embed).__name__}")
    layout = model.tokenizer.layout
    start, stop = layout.dna_start_id, min(layout.vocab_size, embed.num_embeddings)
    if not 0 <= start < stop:
        raise ValueError(f"the DNA block [{start}, {stop}) is outside the embedding table")
    embed.weight.requires_grad_(False)
    rows = nn.Parameter(embed.weight.detach()[start:stop], requires_grad=True)
    model.embed_rows = rows
    embed.__class__ = DnaBlockEmbedding
    embed.block = (rows, start)  # a tuple: not registered as the backbone's parameter
    return rows
