"""A one-line, plain-words account of a VEP job: rows per status, and why rows were not scored.

    ok 120, skipped 3 (contig absent 2, symbolic allele 1), failed 1 (scoring error 1)

Reasons are free text naming the record; :func:`reason_category` folds them into a few short
labels so that a million skipped rows summarise in one line.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["STATUS_ORDER", "reason_category", "status_summary"]

#: Statuses in the order the summary lists them.
STATUS_ORDER = ("ok", "skipped", "ref_mismatch", "failed")

# (substring of the reason, label); the first match wins
_CATEGORIES = (
    ("is not in the FASTA", "contig absent"),
    ("symbolic allele", "symbolic allele"),
    ("breakend", "symbolic allele"),
    ("'*' allele", "symbolic allele"),
    ("no ALT allele", "no ALT"),
    ("ALT equals REF", "ALT equals REF"),
    ("allele contains N", "N in allele"),
    ("scores SNVs only", "not an SNV (next_base)"),
    ("<oov>", "N next to the variant"),
    ("too short", "contig too short"),
    ("more tokens than the model", "allele too long"),
    ("does not match the FASTA", "REF differs from FASTA"),
    ("runs past the end", "REF past contig end"),
    ("scoring failed", "scoring error"),
    ("non-finite score", "non-finite model output"),
    ("malformed", "malformed line"),
    ("not a nucleotide", "bad allele"),
    ("allele is missing", "bad allele"),
    ("not a 1-based position", "bad position"),
)


def reason_category(reason: str | None) -> str:
    """A short label for a row's reason (``"other"`` when none of the known kinds matches)."""
    if not reason:
        return "no reason"
    for needle, label in _CATEGORIES:
        if needle in reason:
            return label
    return "other"


def status_summary(counts: Mapping[str, int], reasons: Mapping[tuple[str, str], int] | None = None) -> str:
    """``"ok 120, skipped 3 (contig absent 2, symbolic allele 1), failed 1"`` from rows per status
    and rows per ``(status, reason category)``."""
    parts = []
    statuses = [s for s in STATUS_ORDER if counts.get(s)] + sorted(set(counts) - set(STATUS_ORDER))
    for status in statuses:
        detail = sorted(
            ((label, n) for (st, label), n in (reasons or {}).items() if st == status and n),
            key=lambda item: (-item[1], item[0]),
        )
        text = f"{status} {counts[status]:,}"
        if detail and status != "ok":
            text += " (" + ", ".join(f"{label} {n:,}" for label, n in detail) + ")"
        parts.append(text)
    return ", ".join(parts) or "no rows"
