"""The speculative-decoding bench: synthetic pairs, rows per (pair, mode, decoding), CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hexamer import Carbon
from hexamer.bench.report import BenchReport
from hexamer.bench.spec import TINY_PAIR, build_spec_pair, run_spec_bench
from hexamer.testing.cli import run, run_ok


def test_noise_zero_target_computes_what_the_draft_computes(tmp_path: Path) -> None:
    draft_dir, target_dir = build_spec_pair(tmp_path, TINY_PAIR, noise=0.0)
    draft, target = Carbon.from_pretrained(draft_dir), Carbon.from_pretrained(target_dir)
    assert target.model.config.num_hidden_layers == 3 and draft.model.config.num_hidden_layers == 1
    a, b = target.score("ACGTACGGATTACA"), draft.score("ACGTACGGATTACA")
    assert a.mean == pytest.approx(b.mean, abs=1e-5)
    again = build_spec_pair(tmp_path, TINY_PAIR, noise=0.0)  # reused, not rebuilt
    assert again == (draft_dir, target_dir)
    _, noisy = build_spec_pair(tmp_path, TINY_PAIR, noise=0.05)
    assert Carbon.from_pretrained(noisy).score("ACGTACGGATTACA").mean != pytest.approx(a.mean, abs=1e-4)


def test_report_rows(tmp_path: Path) -> None:
    report = run_spec_bench(
        quick=True,
        log=lambda _: None,
        cache_root=tmp_path,
        shape=TINY_PAIR,
        noises=(0.0,),
        new_bp=30,
        prompt_bp=20,
    )
    assert isinstance(report, BenchReport) and report.name == "spec"
    assert [(r["pair"], r["mode"], r["decoding"]) for r in report.rows] == [
        ("noise 0", m, d) for m in ("token", "bp") for d in ("greedy", "sampled")
    ]
    for r in report.rows:
        assert r["speed-up"] == pytest.approx(r["spec bp/s"] / r["target bp/s"])
        assert r["greedy same"] == ("yes" if r["decoding"] == "greedy" else None)
        assert r["tokens/fwd"] == pytest.approx(r["accepted/fwd"] + 1)
    assert all(r["acceptance"] == 1.0 for r in report.rows)  # noise 0: the draft is always right
    assert "speed-up" in report.to_markdown()
    with pytest.raises(ValueError, match="both"):
        run_spec_bench(quick=True, target=tmp_path)


def test_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEXAMER_CACHE", str(tmp_path))
    draft_dir, target_dir = build_spec_pair(tmp_path, TINY_PAIR, noise=0.01)
    out = tmp_path / "spec.json"
    args = ["bench", "spec", "--target", str(target_dir), "--draft", str(draft_dir), "--new-bp", "18"]
    extra = ["--prompt-bp", "12", "--spec-k", "3", "--decodings", "greedy", "-o", str(out)]
    run_ok([*args, *extra, "--batch-sizes", "1,2"])
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 4 and {r["pair"] for r in rows} == {"given"}
    assert [r["batch"] for r in rows] == [1, 1, 2, 2]
    assert all(r["greedy same"] == "yes" for r in rows)
    for r in rows:  # medians of at least 3 rounds, with the spread
        for side in ("target", "spec"):
            t = r["timings"][side]
            assert t["rounds"] >= 3 and t["seconds_min"] <= t["seconds_median"] <= t["seconds_max"]
        assert r["speed-up"] == pytest.approx(
            r["timings"]["target"]["seconds_median"] / r["timings"]["spec"]["seconds_median"]
        )
    assert run(["bench", "spec", "--target", str(target_dir)]).exit_code != 0
    assert run([*args, "--modes", "kmer"]).exit_code != 0
    assert run([*args, "--spec-k", "0"]).exit_code != 0
