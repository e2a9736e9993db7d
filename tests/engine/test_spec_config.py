"""SpecConfig.from_option: the one range rule for a fixed draft length, shared by every front end."""

from __future__ import annotations

import pytest

from hexamer.engine.spec_config import MAX_NUM_SPECULATIVE, SpecConfig
from hexamer.server.settings import MAX_DRAFT_TOKENS


@pytest.mark.parametrize("value", ["abc", "-5", "0", "99999", 0, 17, True, 2.0])
def test_fixed_draft_lengths_outside_the_range_are_refused(value: object) -> None:
    with pytest.raises(ValueError, match=r"'auto' or an integer in \[1, 16\]"):
        SpecConfig.from_option(value)  # type: ignore[arg-type]


def test_valid_draft_lengths_and_the_server_limit_agree() -> None:
    assert SpecConfig.from_option("auto").adaptive
    assert SpecConfig.from_option("16").k == SpecConfig.from_option(16).k == 16
    assert MAX_NUM_SPECULATIVE == MAX_DRAFT_TOKENS  # --spec-k and --draft-tokens take the same range
