"""The response bound: answers that would carry more than ``max_response_values`` log-probabilities
or per-position scores are refused (400) before any work, naming the field and what to lower."""

from __future__ import annotations

import httpx
import pytest

from hexamer.server.errors import ApiError
from hexamer.server.response_size import check_response_values, completion_terms, score_terms
from hexamer.server.settings import DEFAULT_MAX_RESPONSE_VALUES, ServerSettings


def test_completion_terms_count_every_logprob() -> None:
    terms = completion_terms([5, 3], n=2, max_tokens=10, logprobs=4, prompt_logprobs=None, echo=False)
    assert [(t.param, t.count) for t in terms] == [("logprobs", 2 * (10 + 10) * 5)]
    echo = completion_terms([5], n=1, max_tokens=0, logprobs=4, prompt_logprobs=None, echo=True)
    assert [(t.param, t.count) for t in echo] == [("logprobs", 5 * 5), ("logprobs", 4 * 5)]
    plp = completion_terms([5, 3], n=3, max_tokens=1, logprobs=None, prompt_logprobs=9, echo=False)
    assert [(t.param, t.count) for t in plp] == [("prompt_logprobs", 3 * (4 + 2) * 10)]  # in every choice


def test_score_terms() -> None:
    assert score_terms([600, 7], level="bp", k=6, per_position=True)[0].count == 607
    assert score_terms([600, 7], level="token", k=6, per_position=True)[0].count == 102
    assert score_terms([600], level="bp", k=6, per_position=False) == []


def test_the_message_says_which_limit_and_how_to_stay_under() -> None:
    terms = completion_terms([3], n=8, max_tokens=125, logprobs=4224, prompt_logprobs=None, echo=False)
    with pytest.raises(ApiError) as caught:
        check_response_values(terms, DEFAULT_MAX_RESPONSE_VALUES, "ask for fewer logprobs")
    err = caught.value
    assert err.status == 400 and err.param == "logprobs"
    assert "4,225,000 values" in err.message and "max_response_values of 4,194,304" in err.message
    assert "ask for fewer logprobs" in err.message and "--max-response-values" in err.message
    check_response_values(terms, 4_225_000, "")  # at the bound: admitted


def test_the_setting_is_range_checked() -> None:
    with pytest.raises(ValueError, match="max_response_values must be a positive integer"):
        ServerSettings(max_response_values=0)


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/v1/completions", {"prompt": "<dna>ACGTAC", "n": 8, "logprobs": 4224, "max_tokens": 125}, "logprobs"),
        ("/v1/completions", {"prompt": [5] * 500, "n": 2, "max_tokens": 1, "prompt_logprobs": 4224},
         "prompt_logprobs"),
        ("/v1/completions", {"prompt": [5] * 500, "n": 2, "max_tokens": 0, "echo": True, "logprobs": 4224},
         "logprobs"),
        ("/v1/dna/score", {"sequences": ["ACGTAC" * 2731] * 256, "per_position": True}, "per_position"),
    ],
)  # fmt: skip
def test_too_large_answers_are_refused_before_any_work(url: str, path: str, body: dict, param: str) -> None:
    r = httpx.post(f"{url}{path}", json=body, timeout=60)
    assert r.status_code == 400, r.text[:300]
    error = r.json()["error"]
    assert error["param"] == param and "max_response_values" in error["message"]
    health = httpx.get(f"{url}/health").json()
    assert health["running"] == 0 and health["waiting"] == 0  # nothing was queued


def test_answers_under_the_bound_are_served(url: str) -> None:
    r = httpx.post(f"{url}/v1/dna/score", json={"sequences": ["ACGTAC" * 20] * 2, "per_position": True})
    assert r.status_code == 200
    assert [len(d["per_base"]) for d in r.json()["data"]] == [120, 120]
