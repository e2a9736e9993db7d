"""Timing rounds: a warm-up, at least three alternating rounds, min/median/max and a plain warning."""

from __future__ import annotations

import pytest

from hexamer.bench import timing
from hexamer.bench.timing import (
    MIN_ROUNDS,
    Timing,
    best_of,
    put_spread_warning_first,
    run_rounds,
    spread_warning,
)


def test_rounds_warm_up_alternate_and_never_fall_below_three() -> None:
    calls: list[str] = []
    cases = {"a": lambda: calls.append("a") or "A", "b": lambda: calls.append("b") or "B"}
    out = run_rounds(cases, rounds=1)
    assert calls == ["a", "b", "a", "b", "b", "a", "a", "b"]  # warm-up, then A B / B A / A B
    assert [len(t.seconds) for t in out.values()] == [MIN_ROUNDS, MIN_ROUNDS]
    assert out["a"].result == "A" and out["b"].result == "B"


def test_best_of_keeps_the_fastest_run_and_the_last_result() -> None:
    clock = iter([0.0, 3.0, 10.0, 11.0, 20.0, 22.0])  # runs of 3 s, 1 s, 2 s
    calls: list[int] = []
    seconds, result = best_of(lambda: calls.append(len(calls)) or len(calls), 3, clock=lambda: next(clock))
    assert (seconds, result, calls) == (1.0, 3, [0, 1, 2])
    assert best_of(lambda: "once", 0)[1] == "once"  # at least one run


def test_timing_statistics() -> None:
    t = Timing(seconds=[0.3, 0.1, 0.2])
    assert (t.min, t.median, t.max) == (0.1, 0.2, 0.3)
    assert t.spread == pytest.approx(1.0)
    assert t.summary() == "0.1 / 0.2 / 0.3"
    assert t.as_dict() == {"seconds_min": 0.1, "seconds_median": 0.2, "seconds_max": 0.3, "rounds": 3}


def test_spread_warning_names_the_unsteady_cases() -> None:
    steady = Timing(seconds=[1.0, 1.01, 1.02])
    wild = Timing(seconds=[0.02, 1.0, 1.1])  # one round 50x faster: a 58x "speed-up" in waiting
    assert spread_warning({"a": steady}) is None
    message = spread_warning({"a": steady, "spec": wild})
    assert message is not None and message.startswith("WARNING") and "spec" in message
    assert "a " not in message.split("by", 1)[1].split("of their")[0]

    notes = ["first"]
    put_spread_warning_first(notes, {"a": steady})
    assert notes == ["first"]
    put_spread_warning_first(notes, {"a": steady, "spec": wild})
    assert notes == [message, "first"]


def test_fake_clock_gives_exact_medians(monkeypatch: pytest.MonkeyPatch) -> None:
    ticks = iter(range(100))
    monkeypatch.setattr(timing.time, "perf_counter", lambda: float(next(ticks)))
    out = run_rounds({"x": lambda: None}, rounds=4, warmup=0)
    assert out["x"].seconds == [1.0, 1.0, 1.0, 1.0] and out["x"].spread == 0.0
