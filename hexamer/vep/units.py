"""Work units of a VEP job: plain data that says which sites, which windows or contexts, and
which recipe; the planner (:mod:`~hexamer.vep.planner`) makes them, a :class:`UnitRunner`
(:class:`~hexamer.vep.runner.Runner`, or a fine-tuned head's, :mod:`hexamer.finetune.effects`)
computes their rows. Units depend only on the input, never on what was already done, so a resumed
run recomputes exactly what an uninterrupted one computed."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from hexamer.io.reference import Reference
from hexamer.io.vcf.records import Variant
from hexamer.vep.rows import Key, Row
from hexamer.vep.settings import VepSettings

__all__ = [
    "NextBaseGroup",
    "NextBaseUnit",
    "RunnerFactory",
    "UnitRunner",
    "WindowSite",
    "WindowUnit",
    "WorkUnit",
]


@dataclass(frozen=True)
class WindowSite:
    """Variants sharing one ref window ``[start, end)`` of a FASTA contig (sequences are fetched
    when the unit runs, so a planned block holds coordinates, not megabases of windows)."""

    contig: str
    start: int
    end: int
    members: tuple[Variant, ...]

    def n_windows(self) -> int:
        """The ref window and one window per distinct alt allele."""
        return 1 + len({(v.start, v.ref, v.alt) for v in self.members})

    def max_bases(self) -> int:
        """The longest window of the site: an insertion's alt window holds more bases."""
        return self.end - self.start + max(0, *(len(v.alt) - len(v.ref) for v in self.members))


@dataclass(frozen=True)
class NextBaseGroup:
    """Sites whose contexts start at the same base (so share a prefix): ``sites`` maps each site's
    position ``p0`` (ascending) to its variants."""

    contig: str
    start: int
    sites: Mapping[int, tuple[Variant, ...]]


@dataclass(frozen=True)
class WindowUnit:
    """Window-recipe sites scored together (one batch of windows)."""

    sites: tuple[WindowSite, ...]

    @property
    def variants(self) -> list[Variant]:
        return [v for site in self.sites for v in site.members]

    @property
    def keys(self) -> list[Key]:
        return [v.key for v in self.variants]


@dataclass(frozen=True)
class NextBaseUnit:
    """Next-base groups scored together, each from one forward over its sequence."""

    groups: tuple[NextBaseGroup, ...]

    @property
    def variants(self) -> list[Variant]:
        return [v for g in self.groups for p in sorted(g.sites) for v in g.sites[p]]

    @property
    def keys(self) -> list[Key]:
        return [v.key for v in self.variants]


#: one deterministic piece of work and the variants whose rows it produces
WorkUnit = WindowUnit | NextBaseUnit


class UnitRunner(Protocol):
    """What computes the rows of a unit: one row per variant of ``unit.variants``."""

    def run(self, unit: WorkUnit) -> list[Row]: ...


#: ``make_runner(reference, settings)``: the model work of a job's units (the default is a
#: :class:`~hexamer.vep.runner.Runner` on the model's backend; a fine-tuned head brings its own)
RunnerFactory = Callable[[Reference, VepSettings], UnitRunner]
