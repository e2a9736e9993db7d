"""ScoreOptions: every field is checked before any model work."""

from __future__ import annotations

from pathlib import Path

import pytest

from hexamer import Carbon
from hexamer.backend.score_options import MAX_TOKEN_BUDGET, ScoreOptions
from hexamer.embed import embed_sequences


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


@pytest.mark.parametrize("prefix", ["</dna><|endoftext|>", "<dna>", "<x><dna>GG"])
def test_a_prefix_is_metadata_tags_only_in_every_api(tiny_folder: Path, prefix: str) -> None:
    with pytest.raises(ValueError, match=r"^prefix: "):
        ScoreOptions(prefix=prefix)
    carbon = Carbon.from_pretrained(tiny_folder)
    for call in (
        lambda: carbon.score("ACGTAC", prefix=prefix),
        lambda: carbon.score("ACGTAC", prefix=prefix, stride=6),
        lambda: carbon.base_logprobs("ACGTAC", prefix=prefix),
        lambda: carbon.base_logprobs("ACGTAC" * 10, prefix=prefix, stride=6),
        lambda: carbon.generate("ACGTAC", max_bp=6, prefix=prefix),
        lambda: carbon.check_prompt("ACGTAC", max_bp=6, prefix=prefix),
        lambda: carbon.check_sequence("ACGTAC", prefix=prefix),
        lambda: embed_sequences(carbon, [("a", "ACGTAC")], prefix=prefix),
    ):
        with pytest.raises(ValueError, match=r"^prefix: "):
            call()
    assert carbon.score("ACGTAC", prefix="<mammalian_species> <gene_type>").n_scored == 6
