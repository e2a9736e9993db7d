"""What :meth:`Carbon.score` asks of a backend, checked once at the front end."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hexamer.tokenizer.tags import check_prefix

__all__ = ["MAX_TOKEN_BUDGET", "ScoreOptions"]

#: The largest ``token_budget`` accepted (it caps the padded tokens of one scoring forward; the
#: forward itself is never larger than the sequences need).
MAX_TOKEN_BUDGET = 2**31 - 1


@dataclass(frozen=True)
class ScoreOptions:
    """How sequences are scored (:meth:`hexamer.Carbon.score` documents each field).

    ``level`` ``"bp"`` (mean log P(base)) or ``"token"`` (mean log P(6-mer) over the DNA block);
    ``method`` ``"fns"`` (FNS marginals, the published definition) or ``"exact"`` (within-token
    chain rule; bp level only matters); ``prefix`` (metadata tags only) is put before ``<dna>``; ``token_budget`` bounds
    the padded tokens of one local forward (a server batches on its own and ignores it).
    Invalid values raise ``ValueError`` here, before any model work."""

    level: Literal["bp", "token"] = "bp"
    method: Literal["fns", "exact"] = "fns"
    prefix: str = ""
    token_budget: int = 16384

    def __post_init__(self) -> None:
        if self.level not in ("bp", "token"):
            raise ValueError(f"level must be 'bp' or 'token', got {self.level!r}")
        if self.method not in ("fns", "exact"):
            raise ValueError(f"method must be 'fns' or 'exact', got {self.method!r}")
        check_prefix(self.prefix)  # metadata tags only (hexamer.tokenizer.tags)
        budget = self.token_budget
        if isinstance(budget, bool) or not isinstance(budget, int) or not 1 <= budget <= MAX_TOKEN_BUDGET:
            raise ValueError(f"token_budget must be an integer from 1 to {MAX_TOKEN_BUDGET}, got {budget!r}")
