"""Per-request generation options, validated once when a request is made.

Base masks are written the way biologists write motifs: one IUPAC code per generated base
(``N`` = any, ``A``/``C``/``G``/``T`` fixed, ``R`` = A or G, ``B`` = not A, ...), or as an
``(n, 4)`` boolean array with columns A, C, G, T.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

# IUPAC nucleotide codes -> allowed bases
IUPAC: dict[str, str] = {
    "A": "A", "C": "C", "G": "G", "T": "T", "U": "T",
    "R": "AG", "Y": "CT", "S": "CG", "W": "AT", "K": "GT", "M": "AC",
    "B": "CGT", "D": "AGT", "H": "ACT", "V": "ACG", "N": "ACGT",
}  # fmt: skip
ACGT = "ACGT"
#: column j of an ATCG-ordered mask comes from column ACGT_TO_ATCG[j] of an ACGT-ordered one
ACGT_TO_ATCG = [0, 3, 1, 2]


def parse_base_mask(mask: str | np.ndarray) -> np.ndarray:
    """``(n, 4)`` bool array, columns in the vocabulary's A,T,C,G order, from IUPAC text or an
    ``(n, 4)`` A,C,G,T bool array. Positions that allow nothing are an error."""
    if isinstance(mask, str):
        rows = []
        for i, code in enumerate(mask.strip().upper()):
            allowed = IUPAC.get(code)
            if allowed is None:
                raise ValueError(
                    f"mask position {i + 1}: {code!r} is not an IUPAC nucleotide code (use A C G T N R Y S W K M B D H V)"
                )
            rows.append([b in allowed for b in ACGT])
        acgt = np.array(rows, dtype=bool).reshape(-1, 4)
    else:
        acgt = np.asarray(mask)
        if acgt.ndim != 2 or acgt.shape[1] != 4 or acgt.dtype != bool:
            raise ValueError(
                f"a mask array must be bool with shape (n, 4) (columns A, C, G, T), got {acgt.shape}"
            )
    empty = np.flatnonzero(~acgt.any(axis=1))
    if empty.size:
        raise ValueError(f"impossible mask: position {int(empty[0]) + 1} allows no base")
    return acgt[:, ACGT_TO_ATCG]


@dataclass(frozen=True)
class SamplingParams:
    """How one request is decoded.

    mode: ``"bp"`` samples each base from its FNS marginal (base-pair level); ``"token"`` samples
        whole 6-mers. temperature 0 means greedy. top_p applies per base in bp mode, per 6-mer in
        token mode.
    max_bp: new bases to return (exact: ``ceil`` of it in tokens are generated, the last trimmed).
    max_new_tokens: alternatively, a token budget (the output is ``6 * tokens`` bases).
    mask: IUPAC string or ``(n, 4)`` A,C,G,T bool array constraining the first n new bases.
    seed: seeds this request's own random generator, so its output never depends on other requests.
    stop_at_end_tag: token mode only: let the model emit ``</dna>`` and stop there.
    """

    mode: Literal["bp", "token"] = "bp"
    temperature: float = 1.0
    top_p: float = 1.0
    max_bp: int | None = None
    max_new_tokens: int | None = None
    mask: str | np.ndarray | None = field(default=None, compare=False)
    seed: int | None = None
    stop_at_end_tag: bool = False

    def __post_init__(self) -> None:
        if self.mode not in ("bp", "token"):
            raise ValueError(f"mode must be 'bp' or 'token', got {self.mode!r}")
        if (
            not isinstance(self.temperature, int | float)
            or not math.isfinite(self.temperature)
            or self.temperature < 0
        ):
            raise ValueError(
                f"temperature must be a finite number >= 0 (0 = greedy), got {self.temperature!r}"
            )
        if not isinstance(self.top_p, int | float) or not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must lie in (0, 1], got {self.top_p!r}")
        if (self.max_bp is None) == (self.max_new_tokens is None):
            raise ValueError("give exactly one of max_bp and max_new_tokens")
        for name in ("max_bp", "max_new_tokens"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.seed is not None and (not isinstance(self.seed, int) or isinstance(self.seed, bool)):
            raise ValueError(f"seed must be an integer, got {self.seed!r}")
        if self.stop_at_end_tag and self.mode != "token":
            raise ValueError("stop_at_end_tag needs mode='token' (bp mode always emits bases)")
        if self.mask is not None:
            atcg = parse_base_mask(self.mask)
            limit = self.max_bp if self.max_bp is not None else 6 * int(self.max_new_tokens or 0)
            if len(atcg) > limit:
                raise ValueError(f"mask covers {len(atcg)} bases but only {limit} will be generated")
            object.__setattr__(self, "_mask_atcg", atcg)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @property
    def mask_atcg(self) -> np.ndarray | None:
        """The mask as ``(n, 4)`` bool in A,T,C,G column order (vocabulary order)."""
        return getattr(self, "_mask_atcg", None)
