"""``/v1/dna/design``: the library's designs (same seed, same sequences and scores), every rule met
(DNA Chisel judges), oracle-guided methods with the served head or a PWM/motif in the request,
bounded work (400 before any work, 504 past the design timeout) and ``/health`` answering while a
design runs."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from hexamer import Carbon
from hexamer.design import DesignConstraints, DesignOptions, check, design
from hexamer.server.testing import serve_in_thread
from hexamer.testing.heads import build_head_folder
from tests.design.peer import chisel_failures

RULES: dict[str, Any] = {
    "length": 48, "gc": [0.3, 0.7], "gc_window": 12, "avoid_sites": ["BsaI"], "max_homopolymer": 3,
    "prefix": "GC",
}  # fmt: skip
SPEC = DesignConstraints(
    48, gc=(0.3, 0.7), gc_window=12, avoid_sites=("BsaI",), max_homopolymer=3, prefix="GC"
)
START = "GCATGAAAGTGCTGTGGACCGATTCAGGTACCAAGGTCTTCAACGTAG"


@pytest.fixture(scope="module")
def head_url(tiny_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    head = build_head_folder(tmp_path_factory.mktemp("heads") / "two", targets=("liver", "brain"),
                             zscore=((0.0, 0.0), (1.0, 1.0)))  # fmt: skip
    with serve_in_thread(
        tiny_folder, head=head, max_num_seqs=4, max_model_len=256, max_design_bp=512
    ) as base:
        yield base


def post(url: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{url}/v1/dna/design", json=body, timeout=120)


def test_sampling_equals_the_library(url: str, ref: Carbon) -> None:
    r = post(url, {**RULES, "n": 3, "oversample": 2, "seed": 5, "per_base": True})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "dna.design" and body["summary"]["found"] == 3 and body["summary"]["all_pass"]
    want = design(ref, SPEC, DesignOptions(n=3, oversample=2, seed=5))
    assert [c["sequence"] for c in body["candidates"]] == [c.sequence for c in want.candidates]
    for got, lib in zip(body["candidates"], want.candidates, strict=True):
        assert got["log_likelihood"] == pytest.approx(lib.log_likelihood, abs=1e-6)
        assert got["pass"] and all(v["pass"] for v in got["checks"].values())
        assert got["checks"]["site BsaI"]["value"] == 0 and len(got["base_log_probs"]) == 48
        assert chisel_failures(SPEC, got["sequence"]) == []


def test_beam(url: str) -> None:
    r = post(url, {**RULES, "method": "beam", "width": 4, "n": 2})
    assert r.status_code == 200, r.text
    cands = r.json()["candidates"]
    assert len(cands) == 2 and cands[0]["log_likelihood"] >= cands[1]["log_likelihood"]
    assert all(chisel_failures(SPEC, c["sequence"]) == [] for c in cands)


def test_evolve_with_the_served_head(head_url: str) -> None:
    oracle = {"kind": "head", "target": "liver", "specificity": True}
    body = {**RULES, "method": "evolve", "oracle": oracle, "start": START, "weight": 0.5, "rounds": 2,
            "frozen": [0, 1, 2]}  # fmt: skip
    r = post(head_url, body)
    assert r.status_code == 200, r.text
    out = r.json()
    objectives = [s["objective"] for s in out["trajectory"]]
    assert objectives == sorted(objectives) and out["start"] == START
    best = out["candidates"][0]
    assert best["objective"] == pytest.approx(out["summary"]["best_objective"]) and best["pass"]
    assert best["sequence"][:3] == START[:3]
    for s in out["trajectory"]:
        assert all(c.passed for c in check(SPEC, s["sequence"]))


def test_pwm_and_motif_oracles_need_no_head(url: str) -> None:
    pwm = {"kind": "pwm", "matrix": [[0, 9, 0, 0], [9, 0, 0, 0], [0, 0, 9, 0]], "counts": True}
    r = post(url, {**RULES, "method": "minimal-edit", "oracle": pwm, "start": START, "max_edits": 2})
    assert r.status_code == 200, r.text
    assert r.json()["summary"]["n_edits"] <= 2
    motif = {"kind": "motif", "motif": "CANNTG"}
    r = post(url, {**RULES, "method": "anneal", "oracle": motif, "start": START, "steps": 5, "seed": 1})
    assert r.status_code == 200, r.text and len(r.json()["trajectory"]) == 6


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({"length": 5000}, "design limit"),
        ({"n": 100, "oversample": 3}, "max_design_candidates"),
        ({"avoid_sites": ["FooI"]}, "known enzymes"),
        ({"gc": [0.7, 0.2]}, "gc"),
        ({"prefix": "", "mask": "AAAAAA", "max_homopolymer": 3}, "max_homopolymer"),
        ({"method": "evolve"}, "needs an oracle"),
        ({"method": "evolve", "oracle": {"kind": "head"}, "start": START}, "--head"),
        ({"method": "evolve", "oracle": {"kind": "motif", "motif": "CA"}, "start": START[:40]}, "40 bases"),
        ({"method": "evolve", "oracle": {"kind": "pwm", "matrix": [[1, 2]]}, "start": START}, "(width, 4)"),
        (
            {"method": "anneal", "oracle": {"kind": "motif", "motif": "CA"}, "steps": 10**6},
            "max_design_steps",
        ),
        ({"colour": "red"}, "colour"),
    ],
)
def test_bad_requests_are_400(url: str, extra: dict[str, Any], words: str) -> None:
    r = post(url, {**RULES, **extra})
    assert r.status_code == 400, r.text
    assert words in r.json()["error"]["message"]


def test_timeout_and_health_during_a_design(tiny_folder: Path) -> None:
    with serve_in_thread(tiny_folder, max_num_seqs=4, max_model_len=512, design_timeout_s=2.0) as base:
        box: dict[str, httpx.Response] = {}
        body = {"length": 1200, "method": "beam", "width": 64, "n": 1, "avoid_sites": ["BsaI", "EcoRI"]}
        thread = threading.Thread(target=lambda: box.setdefault("r", post(base, body)))
        started = time.monotonic()
        thread.start()
        time.sleep(0.5)
        slowest = 0.0
        while thread.is_alive() and time.monotonic() - started < 1.5:
            t0 = time.monotonic()
            assert httpx.get(f"{base}/health", timeout=5).status_code == 200
            slowest = max(slowest, time.monotonic() - t0)
            time.sleep(0.1)
        thread.join(timeout=60)
        # Blocked behind the job, /health would wait out the rest of the 2 s design; 1 s (the bound the
        # other /health tests use) leaves room for one collector pause late in a long test run.
        assert slowest < 1.0, f"/health took {slowest:.2f} s during a design"
        assert box["r"].status_code == 504 and "design_timeout_s" in box["r"].json()["error"]["message"]
        assert time.monotonic() - started < 10


def test_a_sampling_design_past_its_timeout_leaves_the_model_usable(tiny_folder: Path) -> None:
    with serve_in_thread(tiny_folder, max_num_seqs=4, max_model_len=512, design_timeout_s=1.0) as base:
        r = post(base, {"length": 2000, "n": 64, "avoid_sites": ["BsaI", "EcoRI"], "max_homopolymer": 4})
        assert r.status_code == 504, r.text
        assert "design_timeout_s" in r.json()["error"]["message"]  # stopped inside the engine run
        small = post(base, {**RULES, "n": 2})  # the design's engine rows were dropped: it runs again
        assert small.status_code == 200, small.text
        assert small.json()["summary"]["found"] == 2
