"""A calibration table: raw VEP scores -> PHRED-like scores against a background distribution.

Raw scores of different models or recipes are not comparable (nats of one model's likelihood).
Like CADD, a raw score is ranked against the scores of a background set of variants (here: all
SNVs of regions sampled from a FASTA, :mod:`hexamer.calibration.background`) and reported as

    PHRED = -10 * log10(fraction of background SNVs at least as deleterious)

so 10 is the top 10 % of the background, 20 the top 1 %, 30 the top 0.1 %. **Sign convention:**
higher PHRED = more deleterious = the alternate allele is *less likely* under the model. For the
window recipe that is a more *negative* raw score (``LL(alt) - LL(ref)``), for the next-base recipe
a more *positive* one (``log P(ref) - log P(alt)``): :data:`ORIENTATION` gives the sign that turns a
raw score into deleteriousness. The mapping is monotone (a step function read off the sorted
background, exact at its points), 0 at or below the background's least deleterious score and
capped at ``10 * log10(n)`` above its most deleterious one.

A table belongs to one model (its backend's ``fingerprint()``) and one set of
recipe settings; :meth:`Calibration.check` refuses any other, so PHRED values never silently mix.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from hexamer.io import atomic_path
from hexamer.vep.recipes import window_placement
from hexamer.vep.settings import RECIPE_FIELDS

if TYPE_CHECKING:
    from hexamer.carbon import Carbon
    from hexamer.vep.settings import VepSettings

__all__ = [
    "FORMAT",
    "ORIENTATION",
    "SCORE_SETTINGS",
    "Calibration",
    "CalibrationError",
    "CalibrationMismatch",
]

PathLike = str | os.PathLike[str]
FORMAT = "hexamer-calibration"
VERSION = 1
#: raw score x orientation = deleteriousness (higher: the alt is less likely under the model)
ORIENTATION = {"window": -1.0, "next_base": 1.0}
#: the settings that decide a score's value (batching knobs do not)
SCORE_SETTINGS = ("recipe", "window", "window_grid", "context", "context_grid", "rc_average")


class CalibrationError(ValueError):
    """A calibration file that cannot be read or used."""


class CalibrationMismatch(CalibrationError):
    """A calibration made for another model or other recipe settings than the run's."""


def score_settings(settings: VepSettings | Mapping[str, Any]) -> dict[str, Any]:
    """The fields of :data:`SCORE_SETTINGS` that apply to the recipe (a window setting does not
    change a next-base score, and the other way round)."""
    values = settings.as_dict() if hasattr(settings, "as_dict") else dict(settings)  # type: ignore[union-attr]
    return {k: values[k] for k in ("recipe", *RECIPE_FIELDS[values["recipe"]])}


@dataclass
class Calibration:
    """Raw score -> PHRED for one model and recipe settings (see the module docstring)."""

    model: str
    settings: dict[str, Any]
    #: distinct background deleteriousness values, ascending, and the PHRED of each
    thresholds: list[float]
    phreds: list[float]
    n_scores: int
    provenance: dict[str, Any] = field(default_factory=dict)

    # ---------------------------------------------------------------- build
    @classmethod
    def from_scores(
        cls,
        scores: Sequence[float] | np.ndarray,
        *,
        model: str,
        settings: VepSettings | Mapping[str, Any],
        provenance: Mapping[str, Any] | None = None,
    ) -> Calibration:
        """The table of a background of raw ``scores`` (finite ones; at least 10)."""
        kept = score_settings(settings)
        raw = np.asarray([s for s in scores if s is not None], dtype=np.float64)
        raw = raw[np.isfinite(raw)]
        if raw.size < 10:
            raise CalibrationError(f"a calibration needs at least 10 background scores, got {raw.size}")
        d = np.sort(ORIENTATION[kept["recipe"]] * raw)
        values = np.unique(d)
        at_least = d.size - np.searchsorted(d, values, side="left")  # background values >= each
        phred = -10.0 * np.log10(at_least / d.size)
        return cls(
            model=model,
            settings=kept,
            thresholds=[float(x) for x in values],
            phreds=[round(float(p), 6) + 0.0 for p in phred],
            n_scores=int(d.size),
            provenance=dict(provenance or {}),
        )

    # ---------------------------------------------------------------- use
    @property
    def orientation(self) -> float:
        return ORIENTATION[self.settings["recipe"]]

    def phred(self, score: float | None) -> float | None:
        """PHRED of a raw score (None for None/NaN). Monotone: more deleterious, higher PHRED."""
        if score is None or not math.isfinite(score):
            return None
        d = self.orientation * score
        t = self._t
        i = int(np.searchsorted(t, d, side="right")) - 1  # the last background value <= d
        return 0.0 if i < 0 else self.phreds[i]

    def phred_many(self, scores: Sequence[float] | np.ndarray) -> np.ndarray:
        """:meth:`phred` of many raw scores (NaN stays NaN)."""
        d = self.orientation * np.asarray(scores, dtype=np.float64)
        i = np.searchsorted(self._t, d, side="right") - 1
        out = np.where(i < 0, 0.0, np.asarray(self.phreds)[np.clip(i, 0, None)])
        return np.where(np.isfinite(d), out, np.nan)

    def annotate(self, rows: Iterable[Mapping[str, Any]]) -> Iterator[dict[str, Any]]:
        """Rows (VEP or ISM) with ``phred`` set: the PHRED of ``ok`` SNV rows, None for the others
        (the background is SNVs: an indel's raw score is not on its scale)."""
        for row in rows:
            ok = row.get("status") == "ok" and row.get("kind") == "SNV"
            yield {**row, "phred": self.phred(row.get("score")) if ok else None}

    def percentile(self, score: float | None) -> float | None:
        """The share of the background (in %) strictly less deleterious than ``score``'s PHRED step."""
        p = self.phred(score)
        return None if p is None else 100.0 * (1.0 - 10.0 ** (-p / 10.0))

    @property
    def _t(self) -> np.ndarray:
        cached = getattr(self, "_t_cache", None)
        if cached is None or len(cached) != len(self.thresholds):
            cached = np.asarray(self.thresholds, dtype=np.float64)
            object.__setattr__(self, "_t_cache", cached)
        return cached

    def check(self, carbon: Carbon | str, settings: VepSettings | Mapping[str, Any]) -> None:
        """Raise :class:`CalibrationMismatch` unless this table was made with this model (or
        fingerprint) and the same score-deciding settings."""
        fingerprint = carbon if isinstance(carbon, str) else carbon.backend.fingerprint()
        problems = []
        if fingerprint != self.model:
            problems.append(f"model fingerprint {fingerprint} (the calibration's: {self.model})")
        wanted = score_settings(settings)
        for key in sorted(set(wanted) | set(self.settings)):
            have, made = wanted.get(key), self.settings.get(key)
            if have == made:
                continue
            if key == "window_grid" and have is not None and made is not None:
                problems.append(
                    f"window placement {window_placement(have)} (the calibration's: {window_placement(made)}, "
                    f"--window-grid {made})"
                )
            else:
                problems.append(f"{key}={have!r} (the calibration's: {made!r})")
        if problems:
            where = self.provenance.get("path", "the calibration")
            raise CalibrationMismatch(
                f"{where} was made for another model or settings: this run has "
                + "; ".join(problems)
                + ". Make a calibration for this model and settings with `hexamer calibrate`."
            )

    # ---------------------------------------------------------------- files
    def as_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "model": self.model,
            "settings": self.settings,
            "sign": (
                "PHRED = -10*log10(share of background SNVs at least as deleterious); higher = the alt "
                f"is less likely under the model; deleteriousness = {self.orientation:+.0f} x raw score"
            ),
            "n_scores": self.n_scores,
            "provenance": self.provenance,
            "thresholds": self.thresholds,
            "phreds": self.phreds,
        }

    def save(self, path: PathLike) -> None:
        """Write as JSON, atomically."""
        data = self.as_dict()
        data["provenance"] = {k: v for k, v in self.provenance.items() if k != "path"}
        with atomic_path(path) as tmp:
            tmp.write_text(json.dumps(data, indent=1) + "\n")

    @classmethod
    def load(cls, path: PathLike) -> Calibration:
        """Read a file written by :meth:`save`; :class:`CalibrationError` names what is wrong."""
        name = os.fspath(path)
        try:
            with open(name, encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError as exc:
            raise CalibrationError(f"{name}: no such calibration file") from exc
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise CalibrationError(f"{name}: not a JSON calibration file ({exc})") from exc
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise CalibrationError(f'{name}: not a hexamer calibration file (no "format": "{FORMAT}")')
        if data.get("version") != VERSION:
            raise CalibrationError(
                f"{name}: calibration version {data.get('version')!r}, this hexamer reads {VERSION}"
            )
        try:
            settings = dict(data["settings"])
            if settings.get("recipe") not in ORIENTATION:
                raise CalibrationError(f"{name}: field settings.recipe is {settings.get('recipe')!r}")
            t = [float(x) for x in data["thresholds"]]
            p = [float(x) for x in data["phreds"]]
            cal = cls(
                str(data["model"]), settings, t, p, int(data["n_scores"]), dict(data.get("provenance") or {})
            )
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, CalibrationError):
                raise
            raise CalibrationError(
                f"{name}: malformed calibration field ({type(exc).__name__}: {exc})"
            ) from exc
        if (
            not t
            or len(t) != len(p)
            or any(b <= a for a, b in itertools.pairwise(t))
            or any(b < a for a, b in itertools.pairwise(p))
        ):
            raise CalibrationError(f"{name}: thresholds/phreds are not increasing tables of one length")
        cal.provenance["path"] = name
        return cal
