"""The settings of a VEP run (:class:`VepSettings`: every default in one place, checked once at
the edge), the columns and statuses of a result row, and the warnings a run gives."""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from hexamer.vep.recipes import (
    DEFAULT_CONTEXT,
    DEFAULT_CONTEXT_GRID,
    DEFAULT_WINDOW,
    RECIPES,
    NextBaseContext,
    min_context,
    min_window,
    window_tokens,
)

if TYPE_CHECKING:
    from hexamer.carbon import Carbon

__all__ = [
    "RECIPE_FIELDS",
    "ROW_COLUMNS",
    "STATUSES",
    "TOKEN_BUDGET_CPU",
    "ContigRenameWarning",
    "SettingsFittedWarning",
    "VepSettings",
    "VepSettingsError",
    "default_token_budget",
    "warn_at_caller",
]

#: The :class:`VepSettings` fields each recipe reads: a window setting never changes a next-base
#: score, nor the other way round (calibration tables and benchmarks keep only these).
RECIPE_FIELDS: dict[str, tuple[str, ...]] = {
    "window": ("window", "window_grid", "rc_average"),
    "next_base": ("context", "context_grid"),
}

#: Columns of a result row, in output order.
ROW_COLUMNS = (
    "record",
    "alt_index",
    "id",
    "chrom",
    "pos",
    "ref",
    "alt",
    "kind",
    "recipe",
    "score",
    "status",
    "reason",
    "n_scored_bp",
    "n_oov_bp",
)
#: ``ok`` scored; ``skipped`` not scorable by design (symbolic, ALT equal to REF, unknown contig,
#: kind the recipe does not score, N alleles, variant bases inside an ``<oov>`` 6-mer, too long);
#: ``ref_mismatch`` REF differs from the FASTA; ``failed`` malformed input or an error while scoring.
STATUSES = ("ok", "skipped", "ref_mismatch", "failed")


class ContigRenameWarning(UserWarning):
    """A VCF contig was matched to a differently spelled FASTA contig (``chr20`` -> ``20``)."""


class VepSettingsError(ValueError):
    """A setting out of range. ``field`` names it, so the CLI can name its option (``--window``)
    and the server its request field (``window``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class SettingsFittedWarning(UserWarning):
    """A window or context larger than the model's context was cut to fit it (old and new values)."""


#: the ``hexamer`` package folder: frames in it are not where a user called from
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def warn_at_caller(message: str, category: type[Warning]) -> None:
    """Warn at the first frame outside the package: the user's call of :func:`score_variants` or
    ``run_vep`` (or their loop over its rows), however deep inside hexamer the cause was found.
    A fixed ``stacklevel`` would point into hexamer on some of the paths that reach here."""
    level, frame = 2, sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR):
        level, frame = level + 1, frame.f_back
    warnings.warn(message, category, stacklevel=level if frame is not None else 2)


#: Default tokens per forward on CPU. Larger forwards lose more to activations that no longer fit
#: in cache than they gain from batching: 500M shape, 4 single-ALT SNVs, 8,192 bp windows, 2
#: threads: 41.9 s at 4,096 tokens vs 54.1 s at 16,384 (docs/benchmarks.md).
TOKEN_BUDGET_CPU = 4096


def default_token_budget(device_type: str) -> int:
    """Tokens per forward when none is given: :data:`TOKEN_BUDGET_CPU` on CPU, else 16,384."""
    return TOKEN_BUDGET_CPU if device_type == "cpu" else 16384


@dataclass(frozen=True)
class VepSettings:
    """Everything that decides the numbers (and the work units) of a run."""

    recipe: str = "window"
    window: int = DEFAULT_WINDOW
    #: window recipe: centre windows on ``window_grid``-bp tiles (1 = on each variant), see recipes
    window_grid: int = 1
    context: int = DEFAULT_CONTEXT
    context_grid: int = DEFAULT_CONTEXT_GRID
    rc_average: bool = False
    batch_size: int = 8
    #: tokens per forward; None = by device (:data:`TOKEN_BUDGET_CPU` on CPU, else 16,384)
    token_budget: int | None = None
    block_records: int = 50_000

    @property
    def is_checked(self) -> bool:
        """Made by :meth:`checked` (so the pipeline does not check it again)."""
        return self.__dict__.get("_is_checked", False)

    def checked(self, carbon: Carbon, *, on_note: Callable[[str], None] | None = None) -> VepSettings:
        """Validate against the model (``carbon.backend``). A window or next-base context that does
        not fit the model is cut to fit, like ``hexamer eval`` does, and said so:
        ``on_note(message)`` with the old and new values (default: a :class:`SettingsFittedWarning`).
        The result is marked :attr:`is_checked`; checking it again changes nothing."""
        backend = carbon.backend
        return self.checked_for(
            backend.device.type, backend.max_prompt_tokens, carbon.layout.k, on_note=on_note
        )

    def checked_for(
        self,
        device_type: str,
        max_prompt_tokens: int,
        k: int,
        *,
        on_note: Callable[[str], None] | None = None,
    ) -> VepSettings:
        """:meth:`checked` for a model known only by its device type (``"cpu"``, ``"cuda"``), the
        longest prompt it takes and its k (a scorer outside hexamer, e.g. the published baseline)."""
        out = self._checked(device_type, max_prompt_tokens, k, on_note)
        out = replace(out)  # a new object: the caller's settings stay as they were
        object.__setattr__(out, "_is_checked", True)
        return out

    def check(self, k: int = 6) -> VepSettings:
        """Range-check every field without the model (the rules of :mod:`hexamer.vep.recipes`):
        the CLI calls it as it parses its options, the server on each request, and
        :meth:`checked` again with the model's k. Raises :class:`VepSettingsError` naming the
        field; returns ``self``."""
        if self.recipe not in RECIPES:
            raise VepSettingsError(
                "recipe", f"recipe must be one of {', '.join(RECIPES)}, got {self.recipe!r}"
            )
        for name in ("batch_size", "token_budget", "block_records"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise VepSettingsError(name, f"{name} must be >= 1, got {value}")
        # both lengths are checked whatever the recipe: a number given is a number checked
        shortest = min_window(k)
        if self.window < shortest:
            raise VepSettingsError(
                "window",
                f"window must be at least {shortest} bp (the variant's {k}-mer and two whole {k}-mers "
                f"on each side: a shorter window scores the REF>ALT pair, not the site), got {self.window}",
            )
        shortest = min_context(k)
        if self.context < shortest:
            raise VepSettingsError(
                "context",
                f"context must be at least {shortest} bp (two whole {k}-mers: a shorter context scores the "
                f"REF>ALT pair, not the site), got {self.context}",
            )
        if self.context_grid < 1:
            raise VepSettingsError("context_grid", f"context_grid must be >= 1 bp, got {self.context_grid}")
        if self.recipe == "window":
            if not 1 <= self.window_grid <= self.window // 2:
                raise VepSettingsError(
                    "window_grid",
                    f"window_grid must be between 1 (windows centred on each variant) and half the "
                    f"window ({self.window // 2} bp), got {self.window_grid}",
                )
            return self
        if self.rc_average:
            raise VepSettingsError(
                "rc_average", "rc_average applies to the window recipe only (next_base reads left context)"
            )
        if self.window_grid != 1:
            raise VepSettingsError("window_grid", "window_grid applies to the window recipe only")
        return self

    def _checked(
        self, device_type: str, positions: int, k: int, on_note: Callable[[str], None] | None
    ) -> VepSettings:

        def note(message: str) -> None:
            if on_note is not None:
                on_note(message)
            else:
                warn_at_caller(message, SettingsFittedWarning)

        self.check(k)
        if self.token_budget is None:  # a server answers on the CPU side: its units are per window
            budget = default_token_budget(device_type)
            return replace(self, token_budget=budget)._checked(device_type, positions, k, on_note)
        # positions: a served model needs room for the one completion token of a prompt-logprobs request
        if self.recipe == "window":
            return self._fitted_window(positions, k, note)
        ctx = NextBaseContext.for_model(self.context, self.context_grid, positions, k)
        if ctx.context < min_context(k):
            raise ValueError(
                f"the model takes {positions} tokens: no room for a next-base context of {min_context(k)} bp"
            )
        if ctx.context < self.context - self.context % k:
            note(
                f"context {self.context} bp -> {ctx.context} bp: the model takes {positions} tokens "
                f"(at most {k * (positions - 1)} bp with the grid)"
            )
        if ctx.grid < max(k, self.context_grid - self.context_grid % k):
            note(f"context_grid {self.context_grid} bp -> {ctx.grid} bp so that every context fits the model")
        return VepSettings(**{**asdict(self), "context": ctx.context, "context_grid": ctx.grid})

    def _fitted_window(self, positions: int, k: int, note: Callable[[str], None]) -> VepSettings:
        """The window cut to the model's ``positions`` (and the grid to half of it), said in ``note``:
        the one fitting rule of ``hexamer vep``, :func:`~hexamer.vep.score_variants` and
        ``/v1/dna/vep``."""
        if window_tokens(self.window, k) <= positions:
            return self
        fitted = k * (positions - 1)
        if fitted < min_window(k):
            raise ValueError(
                f"the model takes {positions} tokens: no room for a window of {min_window(k)} bp, the shortest "
                "that scores the site"
            )
        note(
            f"window {self.window} bp -> {fitted} bp: a {self.window} bp window needs "
            f"{window_tokens(self.window, k)} tokens, the model takes {positions}"
        )
        grid = min(self.window_grid, max(1, fitted // 2))
        if grid != self.window_grid:
            note(f"window_grid {self.window_grid} bp -> {grid} bp (at most half the window)")
        return replace(self, window=fitted, window_grid=grid)

    def as_dict(self) -> dict[str, Any]:
        """The fields (what a resumable job records and compares)."""
        return asdict(self)
