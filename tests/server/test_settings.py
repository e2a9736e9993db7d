"""ServerSettings: every limit is range-checked when the settings are made, before a model loads."""

from __future__ import annotations

import math

import pytest

from hexamer.server.settings import MAX_DRAFT_TOKENS, MAX_PREP_THREADS, MAX_SECONDS, ServerSettings


def test_defaults_are_accepted() -> None:
    assert ServerSettings().request_timeout_s == 600.0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_num_seqs": 0}, "max_num_seqs must be a positive integer"),
        ({"max_num_seqs": 2.5}, "max_num_seqs must be a positive integer"),
        ({"max_queue": True}, "max_queue must be a positive integer"),
        ({"kv_cache_bytes": -1}, "kv_cache_bytes must be a positive integer"),
        ({"request_timeout_s": 0}, "request_timeout_s must be a number of seconds"),
        ({"keep_alive_s": math.nan}, "keep_alive_s must be a number of seconds"),
        ({"body_timeout_s": math.inf}, "body_timeout_s must be a number of seconds"),
        ({"shutdown_grace_s": MAX_SECONDS * 2}, "shutdown_grace_s must be a number of seconds"),
        ({"prep_threads": MAX_PREP_THREADS + 1}, "prep_threads must be at most"),
        ({"draft_tokens": MAX_DRAFT_TOKENS + 1}, "draft_tokens must be an integer"),
        ({"api_key": ""}, "api_key must be a non-empty string"),
    ],
)
def test_out_of_range_settings_are_refused_by_name(options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ServerSettings(**options)


def test_the_largest_values_are_accepted() -> None:
    s = ServerSettings(request_timeout_s=MAX_SECONDS, prep_threads=MAX_PREP_THREADS, max_model_len=None)
    assert s.request_timeout_s == MAX_SECONDS


def test_unknown_options_are_named() -> None:
    with pytest.raises(TypeError, match=r"unknown server setting.*max_seqs"):
        ServerSettings.from_options(max_seqs=3)
