"""Failures a remote scorer meets: server down, auth, 429/503, malformed answers, short top-N."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hexamer import Carbon
from hexamer.remote import MalformedResponse, RemoteError, TopNWarning
from tests.remote.fake_server import FakeSettings, free_port_url, make_app, serve


def test_server_down_names_the_url(tiny_folder: Path) -> None:
    url = free_port_url()
    with pytest.raises(
        RemoteError, match=r"GET http://127\.0\.0\.1:\d+/v1/models failed after 2 attempts.*running"
    ) as err:
        Carbon.from_server(url, tokenizer=tiny_folder, max_retries=1)
    assert err.value.status is None and err.value.url.startswith(url)


def test_api_key(local: Carbon, tiny_folder: Path) -> None:
    with serve(make_app(local, FakeSettings(api_key="s3cret"))) as url:
        with pytest.raises(
            RemoteError, match=r"/v1/models returned HTTP 401: Unauthorized \(check the API key"
        ) as err:
            Carbon.from_server(url, tokenizer=tiny_folder)
        assert err.value.status == 401
        with pytest.raises(RemoteError, match="HTTP 401"):
            Carbon.from_server(url, tokenizer=tiny_folder, api_key="wrong")
        with Carbon.from_server(url, tokenizer=tiny_folder, api_key="s3cret", top_n=4608) as m:
            assert np.isfinite(m.score("ACGTACGT").mean)


@pytest.mark.parametrize("status", [429, 503])
def test_busy_server_is_retried(local: Carbon, tiny_folder: Path, status: int) -> None:
    settings = FakeSettings(fail_status=status)
    with (
        serve(make_app(local, settings)) as url,
        Carbon.from_server(url, tokenizer=tiny_folder, top_n=4608) as m,
    ):
        settings.fail_first = 2
        settings.calls.clear()
        assert np.isfinite(m.score("ACGTACGTAAAC").mean)
        assert settings.calls.count("/v1/completions") == 3
        settings.fail_first = 100
        with pytest.raises(
            RemoteError, match=rf"returned HTTP {status} after 3 attempts: server busy"
        ) as err:
            Carbon.from_server(url, tokenizer=tiny_folder, max_retries=2).score("ACGTACGT")
        assert err.value.status == status


@pytest.mark.parametrize(
    "kind,message",
    [
        ("not_json", "but not JSON"),
        ("no_choices", "malformed response: no 'choices' list"),
        ("short_prompt_logprobs", r"prompt_logprobs has 2 entries for a prompt of 3 tokens"),
        ("bad_entry", r"prompt_logprobs\[2\] has entry 'abc'"),
    ],
)
def test_malformed_answers(local: Carbon, tiny_folder: Path, kind: str, message: str) -> None:
    settings = FakeSettings()
    with serve(make_app(local, settings)) as url, Carbon.from_server(url, tokenizer=tiny_folder) as m:
        settings.malformed = kind
        with pytest.raises(MalformedResponse, match=message) as err:
            m.score("ACGTACGTAAAC")
        assert url in str(err.value)


def test_too_many_logprobs_gives_a_hint(local: Carbon, tiny_folder: Path) -> None:
    with (
        serve(make_app(local, FakeSettings(max_logprobs=20))) as url,
        Carbon.from_server(url, tokenizer=tiny_folder) as m,
    ):
        with pytest.raises(
            RemoteError, match=r"HTTP 400: Requested prompt logprobs of 4096.*--max-logprobs 4096"
        ):
            m.score("ACGTACGT")
        m.backend.top_n = 20
        with pytest.warns(TopNWarning, match="lacked some k-mers in the server's top 20"):
            assert np.isfinite(m.score("ACGTACGTAAAC").mean)


def test_top_n_missing_the_true_token(local: Carbon, tiny_folder: Path) -> None:
    settings = FakeSettings(drop_true_token=True)
    with (
        serve(make_app(local, settings)) as url,
        Carbon.from_server(url, tokenizer=tiny_folder, top_n=16) as m,
    ):
        with pytest.warns(TopNWarning, match=r"the true k-mer itself was not returned.*top_n="):
            result = m.score("ACGTACGTAAACGGGTTT", level="token")
        assert np.isneginf(result.per_token).all() and result.mean == -np.inf
        assert m.backend.last_coverage.true_missing == 3
        with pytest.warns(TopNWarning):  # bp level stays defined: the other k-mers carry the bases
            bp = m.score("ACGTACGTAAACGGGTTT", level="bp")
        assert bp.n_scored == 18


def test_unknown_model_and_backend(vllm_url: str, tiny_folder: Path) -> None:
    with pytest.raises(ValueError, match="serves tiny-carbon, not 'Carbon-3B'"):
        Carbon.from_server(vllm_url, model="Carbon-3B", tokenizer=tiny_folder)
    with pytest.raises(ValueError, match="backend must be"):
        Carbon.from_server(vllm_url, backend="tgi", tokenizer=tiny_folder)
    with pytest.raises(ValueError, match="cannot load the tokenizer of served model 'tiny-carbon'"):
        Carbon.from_server(vllm_url)
