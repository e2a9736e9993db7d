"""The settings each VEP recipe reads, as the bench passes them on."""

from __future__ import annotations

from hexamer.bench.common import recipe_options
from hexamer.vep.settings import RECIPE_FIELDS, VepSettings


def test_recipe_options_keep_what_the_recipe_reads() -> None:
    given = {"window": 600, "context_grid": 60, "rc_average": True, "context": 120, "window_grid": 1}
    assert recipe_options("window", given) == {"window": 600, "rc_average": True, "window_grid": 1}
    assert recipe_options("next_base", given) == {"context_grid": 60, "context": 120}
    assert recipe_options("window", {"context": 120}) == {}


def test_recipe_fields_are_vep_settings() -> None:
    fields = set(VepSettings().as_dict())
    assert set(RECIPE_FIELDS) == {"window", "next_base"}
    assert all(set(names) <= fields for names in RECIPE_FIELDS.values())
