"""Token rows of different lengths as one padded batch: the one place that builds ids + mask."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch

__all__ = ["PaddedRows", "pad_rows"]


@dataclass(frozen=True)
class PaddedRows:
    """``ids`` ``(B, T)`` int64 and ``mask`` ``(B, T)`` bool (True = real token) on the CPU.

    ``mask`` is None when every row fills the width, so the model can take its unmasked fast path.
    ``lengths``: real tokens per row. ``side``: where the padding went.
    """

    ids: torch.Tensor
    mask: torch.Tensor | None
    lengths: list[int]
    side: Literal["right", "left"]

    @property
    def width(self) -> int:
        return int(self.ids.shape[1])

    def ids_on(self, device: torch.device | str) -> torch.Tensor:
        return self.ids.to(device)

    def mask_on(self, device: torch.device | str) -> torch.Tensor | None:
        return None if self.mask is None else self.mask.to(device)

    def last_index(self, device: torch.device | str = "cpu") -> torch.Tensor:
        """Per row, the column of its last real token (an empty row gives 0)."""
        if self.side == "left":
            return torch.full((len(self.lengths),), self.width - 1, dtype=torch.int64, device=device)
        return torch.tensor([max(n - 1, 0) for n in self.lengths], dtype=torch.int64, device=device)


def pad_rows(
    rows: Sequence[Sequence[int]], pad_id: int, *, side: Literal["right", "left"] = "right"
) -> PaddedRows:
    """Pad token rows to the longest (``side`` = where padding goes: right for scoring and for
    appending to per-row cache lengths, left for prompts that must end together)."""
    if side not in ("right", "left"):
        raise ValueError(f"side must be 'right' or 'left', got {side!r}")
    lengths = [len(r) for r in rows]
    width = max(lengths, default=0)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.int64)
    ragged = any(n != width for n in lengths)
    mask = torch.zeros((len(rows), width), dtype=torch.bool) if ragged else None
    for i, row in enumerate(rows):
        n = lengths[i]
        if not n:
            continue
        cols = slice(0, n) if side == "right" else slice(width - n, width)
        ids[i, cols] = torch.as_tensor(row, dtype=torch.int64)
        if mask is not None:
            mask[i, cols] = True
    return PaddedRows(ids=ids, mask=mask, lengths=lengths, side=side)
