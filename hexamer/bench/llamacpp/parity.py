"""The parity gate: llama.cpp must reproduce hexamer's token ids and logits before it is timed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: Parity tolerance per GGUF type: max |logit difference| allowed, relative to max |hexamer logit|,
#: and the least tie-aware top-1 agreement over prompt positions (6-mer rows). Random weights leave
#: near-ties that rounding may break either way, so a position also agrees when llama.cpp's argmax
#: is within that same logit tolerance of hexamer's in hexamer's logits (see :func:`top1_margins`).
TOLERANCES: dict[str, tuple[float, float]] = {"f32": (2e-3, 0.97), "f16": (3e-2, 0.85), "bf16": (6e-2, 0.8)}


class ParityError(RuntimeError):
    """llama.cpp and hexamer disagree on token ids or logits beyond tolerance: timings would be meaningless."""


@dataclass
class ParityReport:
    """How llama.cpp's tokenizer and logits compare with hexamer's on the same prompts."""

    outtype: str
    n_prompts: int
    ids_equal: int  # prompts whose token ids are identical
    positions: int  # prompt positions whose logits were compared
    max_abs_diff: float  # over the full vocabulary
    max_abs_logit: float  # hexamer's largest |logit|, the scale of the diff
    top1_agreement: float  # fraction of positions with the same argmax over the 6-mer rows (raw)
    top1_agreement_full: float  # the same over the full vocabulary
    documented: list[str] = field(default_factory=list)  # known tokenizer differences seen
    greedy_tokens: int = 0  # greedy continuation of the first prompt (exercises the KV-cache path)
    greedy_match: int = 0  # leading tokens on which both greedy continuations agree
    #: hexamer's logit margin (its top 6-mer minus llama.cpp's top 6-mer) at each position whose
    #: 6-mer argmaxes differ: how near a tie each flip was
    flip_margins: list[float] = field(default_factory=list)

    @property
    def relative_diff(self) -> float:
        return self.max_abs_diff / max(self.max_abs_logit, 1e-12)

    def tie_tolerance(self, tolerances: dict[str, tuple[float, float]] | None = None) -> float:
        """The absolute logit margin under which a flipped argmax counts as a near-tie: the logit
        discrepancy the gate accepts (relative tolerance times max |hexamer logit|)."""
        return (tolerances or TOLERANCES)[self.outtype][0] * self.max_abs_logit

    def top1_agreement_tie_aware(self, tolerances: dict[str, tuple[float, float]] | None = None) -> float:
        """Top-1 agreement (6-mer rows) counting flips within :meth:`tie_tolerance` as agreement."""
        tol = self.tie_tolerance(tolerances)
        ties = sum(1 for m in self.flip_margins if m <= tol)
        return min(1.0, self.top1_agreement + ties / max(self.positions, 1))

    def check(self, tolerances: dict[str, tuple[float, float]] | None = None) -> ParityReport:
        """Raise :class:`ParityError` when ids differ or logits disagree beyond tolerance."""
        rel_tol, top1_min = (tolerances or TOLERANCES)[self.outtype]
        problems = []
        if self.ids_equal != self.n_prompts:
            problems.append(
                f"token ids differ on {self.n_prompts - self.ids_equal} of {self.n_prompts} prompts"
            )
        if not self.relative_diff <= rel_tol:
            problems.append(
                f"max |logit diff| {self.max_abs_diff:.3g} is {self.relative_diff:.2%} of the logit scale "
                f"{self.max_abs_logit:.3g} (tolerance {rel_tol:.2%})"
            )
        agreement = self.top1_agreement_tie_aware(tolerances)
        if not agreement >= top1_min:
            problems.append(
                f"top-1 6-mer agreement {agreement:.1%} < {top1_min:.0%} counting flips within "
                f"{self.tie_tolerance(tolerances):.3g} of a tie ({self.top1_agreement:.1%} raw)"
            )
        if problems:
            raise ParityError(
                f"llama.cpp ({self.outtype} GGUF) does not reproduce hexamer: "
                + "; ".join(problems)
                + ". Refusing to time a backend that computes something else."
            )
        return self

    def summary(self) -> str:
        return (
            f"parity ({self.outtype}): ids equal on {self.ids_equal}/{self.n_prompts} prompts; "
            f"logits over {self.positions} positions: max |diff| {self.max_abs_diff:.2e} "
            f"({self.relative_diff:.2e} of max |logit| {self.max_abs_logit:.3g}), top-1 agreement "
            f"{self.top1_agreement:.1%} raw / {self.top1_agreement_tie_aware():.1%} tie-aware (flips within "
            f"{self.tie_tolerance():.2e} of a tie count as agreement) over the 6-mer rows, "
            f"{self.top1_agreement_full:.1%} raw over the full vocabulary"
            + (
                f"; greedy continuation identical for {self.greedy_match}/{self.greedy_tokens} tokens"
                if self.greedy_tokens
                else ""
            )
        )


def top1_margins(reference: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Per row of ``(T, N)`` logits, how far ``other``'s argmax is from being ``reference``'s:
    ``reference[t, ref_top] - reference[t, other_top]`` (0 where the argmaxes agree, >= 0 always).

    A row whose margin is within the logit discrepancy between the two engines is a near-tie that
    rounding may break either way; see :func:`top1_agreement`.
    """
    reference = np.asarray(reference, dtype=np.float64)
    other = np.asarray(other, dtype=np.float64)
    if reference.shape != other.shape or reference.ndim != 2:
        raise ValueError(f"logit shapes differ or are not (T, N): {reference.shape} vs {other.shape}")
    rows = np.arange(reference.shape[0])
    return reference[rows, reference.argmax(-1)] - reference[rows, other.argmax(-1)]


def top1_agreement(reference: np.ndarray, other: np.ndarray, tie_tol: float = 0.0) -> tuple[float, float]:
    """``(raw, tie_aware)`` top-1 agreement of ``(T, N)`` logits: the fraction of rows with the same
    argmax, and the fraction where ``other``'s argmax is also within ``tie_tol`` of the maximum of
    ``reference`` (:func:`top1_margins` ``<= tie_tol``).

    ``tie_tol`` must come from an independent budget (the dtype's logit tolerance): any flip's
    margin is at most the sum of the two engines' discrepancies at the two tokens involved, so a
    tolerance taken from the same row's measured difference would excuse every flip.
    """
    if tie_tol < 0:
        raise ValueError(f"tie_tol must be >= 0, got {tie_tol}")
    margins = top1_margins(reference, other)
    if not margins.size:
        return float("nan"), float("nan")  # nothing compared: fails any gate
    same = np.asarray(reference).argmax(-1) == np.asarray(other).argmax(-1)
    return float(np.mean(same)), float(np.mean(same | (margins <= tie_tol)))


def compare_logits(reference: np.ndarray, other: np.ndarray, kmer_rows: tuple[int, int]) -> dict[str, Any]:
    """Max |diff|, the reference scale, top-1 agreement (6-mer rows and full rows) of (T, V) logits,
    and the reference margin of each 6-mer argmax flip (``flip_margins``, see :func:`top1_margins`)."""
    reference = np.asarray(reference, dtype=np.float64)
    other = np.asarray(other, dtype=np.float64)
    if reference.shape != other.shape:
        raise ValueError(f"logit shapes differ: {reference.shape} vs {other.shape}")
    start, stop = kmer_rows
    kref, kother = reference[:, start:stop], other[:, start:stop]
    flipped = kref.argmax(-1) != kother.argmax(-1)
    return {
        "max_abs_diff": float(np.max(np.abs(reference - other))) if reference.size else 0.0,
        "max_abs_logit": float(np.max(np.abs(reference))) if reference.size else 0.0,
        "top1": top1_agreement(kref, kother)[0],
        "top1_full": top1_agreement(reference, other)[0],
        "flip_margins": [float(m) for m in top1_margins(kref, kother)[flipped]],
    }
