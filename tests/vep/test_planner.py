"""The planner hands out work units as plain data, which a UnitRunner dispatches."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from hexamer import Carbon
from hexamer.io.reference import Reference
from hexamer.io.vcf.reader import read_vcf
from hexamer.vep import VepSettings
from hexamer.vep.planner import Planner
from hexamer.vep.runner import Runner
from hexamer.vep.units import NextBaseUnit, WindowUnit

from .conftest import EDGE_VCF, FASTA


@pytest.mark.parametrize("recipe", ["window", "next_base"])
def test_units_are_frozen_data_that_pickle_and_cover_every_scorable_variant(
    carbon: Carbon, recipe: str
) -> None:
    settings = VepSettings(recipe=recipe, window=120, context=60, batch_size=4).checked(carbon)
    with Reference(FASTA) as reference:
        planner = Planner(carbon.backend, reference, settings, lambda _: None)
        rows, scorable = planner.plan(list(read_vcf(EDGE_VCF)))
        units = planner.units(scorable)
        kind = WindowUnit if recipe == "window" else NextBaseUnit
        assert units and all(isinstance(u, kind) for u in units)
        with pytest.raises(dataclasses.FrozenInstanceError):
            units[0].__setattr__("sites" if recipe == "window" else "groups", ())
        assert pickle.loads(pickle.dumps(units)) == units  # data, not closures
        assert sorted(k for u in units for k in u.keys) == sorted(v.key for v in scorable)
        runner = Runner(carbon.backend, reference, settings, naive=False)
        out = [row for u in units for row in runner.run(u)]
    assert sorted((r["record"], r["alt_index"]) for r in out) == sorted(v.key for v in scorable)
    assert {r["status"] for r in rows}.isdisjoint({"ok"})


def test_a_runner_refuses_what_is_not_a_unit(carbon: Carbon) -> None:
    settings = VepSettings().checked(carbon)
    with Reference(FASTA) as reference:
        runner = Runner(carbon.backend, reference, settings, naive=False)
        with pytest.raises(TypeError, match="not a VEP work unit"):
            runner.run(object())  # type: ignore[arg-type]
