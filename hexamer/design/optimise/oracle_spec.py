"""An oracle named in text, as ``hexamer design --oracle`` and ``/v1/dna/design`` take it, checked
before any model loads:

* ``FOLDER`` or ``FOLDER:TARGET``: a head folder saved by ``hexamer finetune`` (its config.json is
  read to check the target; the weights load later, in :meth:`OracleSpec.build`);
* ``pwm:FILE``: a position weight matrix of log-odds scores; ``pwm-counts:FILE``: a count or
  frequency matrix turned into log-odds against a uniform background (:meth:`PwmOracle.from_counts`);
* ``motif:IUPAC``: the number of matches of an IUPAC motif on either strand.

A matrix file has one row per position with four columns A, C, G, T (whitespace, tab or comma
separated; an optional header row names the columns in any order), or JASPAR's layout: four rows
``A [ ... ]``, ``C [ ... ]``, ... Lines starting with ``#`` or ``>`` are skipped.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from hexamer.design.optimise.oracles import HeadOracle, MotifCountOracle, Oracle, PwmOracle

__all__ = ["OracleSpec", "parse_oracle", "read_matrix"]

_SPLIT = re.compile(r"[\s,]+")


def read_matrix(path: str | os.PathLike[str]) -> np.ndarray:
    """A ``(width, 4)`` matrix (columns A, C, G, T) from a matrix file; a ValueError names the file
    and line that is wrong."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise ValueError(f"{p}: cannot read the matrix file ({exc.strerror or exc})") from None
    lines = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.replace("[", " ").replace("]", " ").strip()
        if line and not line.startswith(("#", ">")):
            lines.append((number, [t for t in _SPLIT.split(line) if t]))
    if not lines:
        raise ValueError(f"{p}: no matrix rows")
    order = "ACGT"
    labelled = [cells[0].upper() for _, cells in lines]
    if len(lines) == 4 and sorted(labelled) == list("ACGT"):  # JASPAR: one row per base
        rows = {cells[0].upper(): _numbers(p, n, cells[1:]) for n, cells in lines}
        widths = {len(v) for v in rows.values()}
        if len(widths) != 1:
            raise ValueError(f"{p}: the A, C, G, T rows have different lengths {sorted(widths)}")
        return np.array([rows[b] for b in order], dtype=np.float64).T
    if sorted(c.upper() for c in lines[0][1]) == list("ACGT"):  # header row
        order = "".join(c.upper() for c in lines[0][1])
        lines = lines[1:]
    matrix = []
    for n, cells in lines:
        values = _numbers(p, n, cells)
        if len(values) != 4:
            raise ValueError(f"{p}, line {n}: {len(values)} columns, want 4 (A, C, G, T)")
        matrix.append([values[order.index(b)] for b in "ACGT"])
    if not matrix:
        raise ValueError(f"{p}: no matrix rows")
    return np.array(matrix, dtype=np.float64)


def _numbers(path: Path, line: int, cells: list[str]) -> list[float]:
    try:
        values = [float(c) for c in cells]
    except ValueError:
        raise ValueError(f"{path}, line {line}: not a number in {' '.join(cells)!r}") from None
    if not all(np.isfinite(values)):
        raise ValueError(f"{path}, line {line}: values must be finite")
    return values


@dataclass(frozen=True)
class OracleSpec:
    """A checked oracle description; :meth:`build` makes the oracle (a head loads its weights then)."""

    kind: Literal["head", "pwm", "motif"]
    text: str
    target: str | None = None
    specificity: bool = False
    weights: Any = None  # the (width, 4) log-odds of a PWM
    threshold: float | None = None

    @property
    def width(self) -> int | None:
        """Bases the oracle looks at together (a PWM's or motif's width; None for a head)."""
        if self.kind == "pwm":
            return int(self.weights.shape[0])
        return len(self.text) if self.kind == "motif" else None

    def build(self, **head_options: Any) -> Oracle:
        """The oracle; ``head_options`` go to :meth:`HeadOracle.load` (dtype, device, batch_size)."""
        if self.kind == "motif":
            return MotifCountOracle(self.text)
        if self.kind == "pwm":
            mode = "max" if self.threshold is None else "count"
            return PwmOracle(self.weights, mode=mode, threshold=self.threshold)
        return HeadOracle.load(self.text, self.target, specificity=self.specificity, **head_options)


def _head(text: str, specificity: bool) -> OracleSpec:
    from hexamer.finetune.apply import output_columns, read_head_settings

    folder, target = text, None
    if not Path(text).exists() and ":" in text:
        folder, _, target = text.rpartition(":")
    if not Path(folder).is_dir():
        raise ValueError(f"oracle {text!r}: no such head folder {folder!r} (or use pwm:FILE, motif:IUPAC)")
    settings = read_head_settings(folder)
    columns = list(output_columns(settings.task))
    names = list(settings.task.output_names)
    if target is None and len(columns) != 1:
        raise ValueError(f"oracle {text!r}: the head has {len(columns)} outputs; name one as FOLDER:TARGET "
                         f"({', '.join(columns)})")  # fmt: skip
    if target is not None and target not in columns and target not in names:
        raise ValueError(f"oracle {text!r}: {target!r} is not an output of the head ({', '.join(columns)})")
    if specificity and len(columns) < 2:
        raise ValueError(f"oracle {text!r}: specificity needs a head with at least two outputs")
    return OracleSpec("head", folder, target, specificity)


def parse_oracle(text: str, *, specificity: bool = False, threshold: float | None = None) -> OracleSpec:
    """Check an oracle named in text (module docstring) without loading a model."""
    kind, sep, rest = text.partition(":")
    if specificity and sep and kind in ("pwm", "pwm-counts", "motif"):
        raise ValueError("specificity applies to a head folder oracle only")
    if threshold is not None and not (sep and kind in ("pwm", "pwm-counts")):
        raise ValueError("a threshold applies to a pwm: or pwm-counts: oracle only")
    if threshold is not None and not np.isfinite(threshold):
        raise ValueError(f"the PWM threshold must be finite, got {threshold}")
    if sep and kind == "motif":
        MotifCountOracle(rest)  # checks the IUPAC letters
        return OracleSpec("motif", rest.strip().upper())
    if sep and kind in ("pwm", "pwm-counts"):
        matrix = read_matrix(rest)
        if kind == "pwm-counts":
            if (matrix < 0).any():
                raise ValueError(f"{rest}: counts must be >= 0")
            weights = PwmOracle.from_counts(matrix).weights
        else:
            weights = PwmOracle(matrix).weights
        return OracleSpec("pwm", rest, weights=weights, threshold=threshold)
    if not text:
        raise ValueError(
            "the oracle is empty: give FOLDER[:TARGET], pwm:FILE, pwm-counts:FILE or motif:IUPAC"
        )
    return _head(text, specificity)
