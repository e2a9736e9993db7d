"""ScoreOptions: every field is checked before any model work."""

from __future__ import annotations

from pathlib import Path

import pytest

from hexamer import Carbon
from hexamer.backend.score_options import MAX_TOKEN_BUDGET, ScoreOptions


def test_defaults_are_the_published_definition() -> None:
    assert ScoreOptions() == ScoreOptions("bp", "fns", "", 16384)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"level": "base"}, "level must be 'bp' or 'token'"),
        ({"method": "chain"}, "method must be 'fns' or 'exact'"),
        ({"token_budget": 0}, "token_budget must be an integer from 1"),
        ({"token_budget": MAX_TOKEN_BUDGET + 1}, "token_budget must be an integer from 1"),
        ({"token_budget": 2.5}, "token_budget must be an integer from 1"),
        ({"token_budget": True}, "token_budget must be an integer from 1"),
    ],
)
def test_bad_values_are_refused_by_name(fields: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ScoreOptions(**fields)


def test_prefix_must_be_text() -> None:
    with pytest.raises(TypeError, match="prefix must be a str"):
        ScoreOptions(prefix=3)  # type: ignore[arg-type]


def test_carbon_score_refuses_a_bad_budget_before_scoring(tiny_folder: Path) -> None:
    carbon = Carbon.from_pretrained(tiny_folder)
    with pytest.raises(ValueError, match="token_budget"):
        carbon.score("ACGTAC" * 4, token_budget=-1)
