"""``/v1/dna/generate`` with a draft model: speculative requests equal the library's, batch with
plain ones, and bad options are 400s naming the field."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from hexamer import Carbon
from hexamer.bench.spec import TINY_PAIR, build_spec_pair
from hexamer.server.app import create_app
from hexamer.server.testing import serve_in_thread
from hexamer.testing.cli import run, run_ok

PROMPTS = ["ACGTACGTAC", "TTGACATTGACATTGACA", "GGCAT"]


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(target, draft) folders that partly agree (the target is the draft plus two noisy layers)."""
    draft_dir, target_dir = build_spec_pair(tmp_path_factory.mktemp("spec"), TINY_PAIR, noise=0.02)
    return target_dir, draft_dir


@pytest.fixture(scope="module")
def pair(folders: tuple[Path, Path]) -> tuple[Carbon, Carbon]:
    return Carbon.from_pretrained(folders[0]), Carbon.from_pretrained(folders[1])


@pytest.fixture(scope="module")
def spec_url(folders: tuple[Path, Path]) -> Iterator[str]:
    target_dir, draft_dir = folders
    with serve_in_thread(target_dir, draft=draft_dir, max_num_seqs=8, max_model_len=256) as base:
        yield base


def _generate(url: str, **body: object) -> httpx.Response:
    return httpx.post(f"{url}/v1/dna/generate", json=body, timeout=60)


def _ok(url: str, **body: object) -> dict:
    r = _generate(url, **body)
    assert r.status_code == 200, r.text
    return r.json()


def test_greedy_equals_target_alone(spec_url: str, pair: tuple[Carbon, Carbon]) -> None:
    target, _ = pair
    for mode in ("bp", "token"):
        out = _ok(spec_url, prompt=PROMPTS, max_bp=37, mode=mode, temperature=0, n=2)
        want = target.generate([p for p in PROMPTS for _ in range(2)], max_bp=37, mode=mode, temperature=0)
        assert [c["sequence"] for c in out["choices"]] == [g.sequence for g in want]
        stats = [c["speculative"] for c in out["choices"]]
        assert all(
            s["target_forwards"] >= 1 and 0 <= s["accepted_tokens"] <= s["drafted_tokens"] for s in stats
        )
        assert sum(s["accepted_tokens"] for s in stats) > 0  # the draft did some of the work


def test_stream_deltas_add_up(spec_url: str, pair: tuple[Carbon, Carbon]) -> None:
    """A round emits several 6-mers at once: the streamed deltas still concatenate to the sequence."""
    target, _ = pair
    body = {"prompt": PROMPTS[1], "max_bp": 100, "temperature": 0, "num_draft_tokens": 4, "stream": True}
    text, chunks = "", 0
    with httpx.stream("POST", f"{spec_url}/v1/dna/generate", json=body, timeout=60) as r:
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                text += json.loads(line[6:])["choices"][0]["delta"]
                chunks += 1
    assert text == target.generate(PROMPTS[1], max_bp=100, temperature=0).sequence
    assert 1 < chunks < 100 // 6 + 2  # several tokens per event, not one event per token


def test_sampled_equals_library_with_the_same_draft(spec_url: str, pair: tuple[Carbon, Carbon]) -> None:
    """Same seeds, same draft length: the server's speculative output is the library's, draw for draw."""
    target, draft = pair
    opts = {"max_bp": 41, "mode": "bp", "temperature": 0.9, "top_p": 0.95}
    out = _ok(spec_url, prompt=PROMPTS, seed=7, num_draft_tokens=3, **opts)
    want = target.generate(PROMPTS, seed=7, draft=draft, num_speculative=3, **opts)
    assert [c["sequence"] for c in out["choices"]] == [g.sequence for g in want]
    plain = _ok(spec_url, prompt=PROMPTS, seed=7, draft=False, **opts)  # draft off: the engine's own draws
    assert [c["sequence"] for c in plain["choices"]] == [
        g.sequence for g in target.generate(PROMPTS, seed=7, **opts)
    ]
    assert all("speculative" not in c for c in plain["choices"])


def test_speculative_and_plain_requests_run_together(spec_url: str, pair: tuple[Carbon, Carbon]) -> None:
    target, draft = pair
    bodies = [
        {"prompt": PROMPTS, "max_bp": 120, "temperature": 0},
        {"prompt": PROMPTS, "max_bp": 120, "temperature": 0.8, "seed": 3, "draft": False, "mode": "token"},
        {"prompt": PROMPTS[:2], "max_bp": 90, "temperature": 0.8, "seed": 5, "num_draft_tokens": 2},
    ]
    results: list[dict | None] = [None] * len(bodies)

    def post(i: int) -> None:
        results[i] = _ok(spec_url, **bodies[i])

    threads = [threading.Thread(target=post, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert all(r is not None for r in results)
    wants = [
        target.generate(PROMPTS, max_bp=120, temperature=0),
        target.generate(PROMPTS, max_bp=120, temperature=0.8, seed=3, mode="token"),
        target.generate(PROMPTS[:2], max_bp=90, temperature=0.8, seed=5, draft=draft, num_speculative=2),
    ]
    for got, want in zip(results, wants, strict=True):
        assert got is not None
        assert [c["sequence"] for c in got["choices"]] == [g.sequence for g in want]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"num_draft_tokens": 0}, "num_draft_tokens"),
        ({"num_draft_tokens": 17}, "num_draft_tokens"),
        ({"num_draft_tokens": 2, "draft": False}, "num_draft_tokens"),
        ({"draft": True, "mode": "token", "stop_at_end_tag": True}, "draft"),
    ],
)
def test_bad_draft_options(spec_url: str, body: dict, field: str) -> None:
    r = _generate(spec_url, prompt="ACGTAC", max_bp=12, **body)
    assert r.status_code == 400, r.text
    assert field in r.text


def test_unsupported_request_falls_back_without_draft(spec_url: str, pair: tuple[Carbon, Carbon]) -> None:
    target, _ = pair
    out = _ok(spec_url, prompt="ACGTAC", max_bp=30, mode="token", temperature=0, stop_at_end_tag=True)
    want = target.generate("ACGTAC", max_bp=30, mode="token", temperature=0, stop_at_end_tag=True)
    assert out["choices"][0]["sequence"] == want.sequence and "speculative" not in out["choices"][0]


def test_server_without_a_draft(url: str) -> None:
    for body in ({"draft": True}, {"num_draft_tokens": 3}):
        r = _generate(url, prompt="ACGTAC", max_bp=12, **body)
        assert r.status_code == 400 and "draft" in r.text
    assert _generate(url, prompt="ACGTAC", max_bp=12, draft=False).status_code == 200


def test_incompatible_draft_is_refused(pair: tuple[Carbon, Carbon]) -> None:
    target, draft = pair
    other = Carbon(draft.model, draft.tokenizer)
    other.layout = dataclasses.replace(draft.layout, dna_start_id=draft.layout.dna_start_id - 1)
    with pytest.raises(ValueError, match="layouts differ"):
        create_app(target, draft=other)
    with pytest.raises(ValueError, match="draft_tokens"):
        create_app(target, draft=draft, draft_tokens=0)


def test_serve_command_loads_the_draft(folders: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:

    target_dir, draft_dir = folders
    started = {}
    monkeypatch.setattr(
        "hexamer.server.run.run_server", lambda application, **kw: started.update(app=application)
    )
    args = ["serve", "-m", str(target_dir), "--max-model-len", "256"]
    run_ok([*args, "--draft-model", str(draft_dir), "--draft-tokens", "3"])
    state = started["app"].state.hexamer
    assert state.worker.engine.draft is not None and state.settings.draft_tokens == 3
    assert run([*args, "--draft-model", str(draft_dir), "--draft-tokens", "0"]).exit_code != 0
    assert run([*args, "--draft-tokens", "3"]).exit_code != 0
