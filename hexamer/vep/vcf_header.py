"""The header of an annotated VCF: the ``HEXAMER_*`` INFO fields and provenance lines (what
htslib itself adds while reading, undeclared tags, ``END`` and symbolic ALTs, is
:mod:`hexamer.io.vcf.header`'s)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "CALIBRATED_INFO",
    "HEXAMER_INFO",
    "INFO_OOV_BP",
    "INFO_PHRED",
    "INFO_RAW",
    "INFO_REASON",
    "INFO_RECIPE",
    "INFO_SCORE",
    "INFO_SCORED_BP",
    "INFO_STATUS",
    "add_hexamer_info",
    "add_provenance",
    "extra_info",
    "extra_info_id",
    "vcf_escape",
]

INFO_SCORE = "HEXAMER_SCORE"
INFO_STATUS = "HEXAMER_STATUS"
INFO_RECIPE = "HEXAMER_RECIPE"
INFO_REASON = "HEXAMER_REASON"
INFO_SCORED_BP = "HEXAMER_SCORED_BP"
INFO_OOV_BP = "HEXAMER_OOV_BP"
#: with a calibration (``hexamer vep --calibration``): the raw score and its PHRED, CADD/SpliceAI style
INFO_RAW = "HEXAMER_RAW"
INFO_PHRED = "HEXAMER_PHRED"
CALIBRATED_INFO = (
    (INFO_RAW, "A", "Float", "hexamer raw score of each ALT allele (the same as HEXAMER_SCORE)"),
    (
        INFO_PHRED,
        "A",
        "Float",
        "hexamer PHRED-like score of each ALT allele: -10*log10(share of background SNVs at least as "
        "deleterious); higher = the alt is less likely under the model (docs/ism.md)",
    ),
)
HEXAMER_INFO = (
    (
        INFO_SCORE,
        "A",
        "Float",
        "hexamer variant-effect score of each ALT allele (see HEXAMER_RECIPE for its sign)",
    ),
    (
        INFO_STATUS,
        "A",
        "String",
        "hexamer scoring status of each ALT allele: ok, skipped, ref_mismatch or failed",
    ),
    (
        INFO_SCORED_BP,
        "A",
        "Integer",
        "hexamer: bases scored in each window of each ALT (window recipe) or read in its context (next_base)",
    ),
    (
        INFO_OOV_BP,
        "A",
        "Integer",
        "hexamer: bases of those windows or contexts inside <oov> 6-mers (a non-ACGT base), not scored",
    ),
    (
        INFO_RECIPE,
        "1",
        "String",
        "hexamer recipe: window = LL(alt) - LL(ref); next_base = log P(ref) - log P(alt)",
    ),
    (
        INFO_REASON,
        "A",
        "String",
        "why hexamer did not score an ALT allele (percent-encoded: %20 space, %2C comma, %3B semicolon, "
        "%3D equals sign, %25 percent sign)",
    ),
)

_PERCENT = str.maketrans(
    {**{chr(c): f"%{c:02X}" for c in (*range(32), 127)}, **{c: f"%{ord(c):02X}" for c in "%,;= "}}
)


def vcf_escape(text: str) -> str:
    """``text`` as an INFO value: ``%``, ``,``, ``;``, ``=``, spaces and control characters
    percent-encoded (VCF 4.3 section 1.2; spaces too, which VCF 4.2 readers refuse in INFO).
    ``urllib.parse.unquote`` gives the text back."""
    return text.translate(_PERCENT)


def extra_info_id(column: str) -> str:
    """The INFO field of an extra row column (a fine-tuned head's output): ``HEXAMER_<column>``,
    any character an INFO ID may not hold replaced by ``_``."""
    return "HEXAMER_" + re.sub(r"[^0-9A-Za-z_.]", "_", column)


def extra_info(columns: Mapping[str, str]) -> tuple[tuple[str, str, str, str], ...]:
    """INFO declarations (Number=A, Float) of extra columns given as ``column -> description``."""
    out = tuple((extra_info_id(c), "A", "Float", d) for c, d in columns.items())
    ids = [ident for ident, *_ in out]
    taken = {ident for ident, *_ in (*HEXAMER_INFO, *CALIBRATED_INFO)}
    if len(set(ids)) != len(ids) or taken & set(ids):
        raise ValueError(f"columns {', '.join(columns)} give INFO fields that repeat: {', '.join(ids)}")
    return out


def add_hexamer_info(header: Any, calibrated: bool = False, extra: Mapping[str, str] | None = None) -> None:
    """Declare the ``HEXAMER_*`` INFO fields (and the calibrated ones when ``calibrated``, and one
    per ``extra`` column, ``column -> description``)."""
    declared = (*HEXAMER_INFO, *(CALIBRATED_INFO if calibrated else ()), *extra_info(extra or {}))
    for ident, number, kind, description in declared:
        if ident in header.info:
            have = header.info[ident]
            if str(have.number) != number or have.type != kind:
                raise ValueError(
                    f"the input header already defines INFO {ident} as Number={have.number},Type={have.type}; "
                    f"hexamer writes Number={number},Type={kind}"
                )
            continue
        header.info.add(ident, number, kind, description)


def add_provenance(header: Any, provenance: Mapping[str, str] | None) -> None:
    """``##hexamer_KEY=VALUE`` lines (one line each: newlines become spaces)."""
    for key, value in (provenance or {}).items():
        header.add_line(f"##hexamer_{key}=" + " ".join(str(value).splitlines()))
