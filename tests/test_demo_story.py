"""``hexamer demo`` / ``run_demo``: every output file is written, complete and consistent with the
returned numbers (checked on a tiny random model: the story's plumbing, not the model's quality)."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pysam
import pytest

from hexamer.demo import demo_data_files, run_demo
from hexamer.demo.heldout import heldout_windows
from hexamer.demo.story import OUTPUT_FILES, UNIFORM_LOGP, DemoResult
from hexamer.testing.cli import run, run_ok


@pytest.fixture(scope="module")
def result(tiny_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> DemoResult:
    messages: list[str] = []
    res = run_demo(tmp_path_factory.mktemp("demo") / "out", model=tiny_folder, say=messages.append)
    assert len(messages) == 9  # one per step
    return res


def _tsv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def test_every_output_is_in_the_named_folder(result: DemoResult) -> None:
    names = {p.name for p in result.files}
    assert names == set(OUTPUT_FILES)
    for path in result.files:
        assert path.parent == result.out_dir and path.stat().st_size > 0
    for png in ("scores.png", "copy_test.png", "ism_heatmap.png"):
        assert (result.out_dir / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in result.out_dir.iterdir() if p.name.startswith(".")]  # no temp leftovers
    summary = json.loads((result.out_dir / "summary.json").read_text())
    assert summary == json.loads(json.dumps(result.to_dict()))


def test_tables_hold_every_record(result: DemoResult) -> None:
    out = result.out_dir
    _, windows = heldout_windows(demo_data_files())
    n_sequences = len({name for name, _ in windows})
    scores = _tsv(out / "scores.tsv")
    assert len(scores) == 2 * n_sequences
    assert {r["kind"] for r in scores} == {"real", "shuffled"}
    assert all(float(r["uniform"]) == pytest.approx(UNIFORM_LOGP, abs=1e-5) for r in scores)
    copy = _tsv(out / "copy_test.tsv")
    assert len(copy) == 2 * 1200 and {r["copy"] for r in copy} == {"1", "2"}
    tokens = _tsv(out / "tokens.tsv")
    assert len(tokens) == result.steps["tokenise"]["n_tokens"]
    triplet = _tsv(out / "triplet_expansion.tsv")
    assert len(triplet) == result.steps["triplet_expansion"]["pairs"] > 0
    assert len(_tsv(out / "variants.tsv")) == result.steps["variants_embeddings"]["variants"] == 6
    assert len(_tsv(out / "embeddings.tsv")) == 6  # 4 sequences, every pair


def test_generated_fasta(result: DemoResult) -> None:
    with pysam.FastxFile(str(result.out_dir / "generated.fa")) as fx:
        records = {r.name: r.sequence for r in fx}
    assert [
        len(records[n]) for n in ("prompt", "truth", "model_greedy", "model_sampled", "markov6_greedy")
    ] == [
        1200,
        300,
        300,
        300,
        300,
    ]
    masked = records["model_masked"]
    assert len(masked) == 60 and masked[6:9] == "ATG" and masked[30:33] == "TAA"
    gen = result.steps["generate"]
    assert gen["mask_respected"] is True
    truth = records["truth"]
    assert gen["greedy_identity"] == pytest.approx(
        sum(a == b for a, b in zip(records["model_greedy"], truth, strict=True)) / 300, abs=1e-4
    )


def test_numbers_are_consistent(result: DemoResult) -> None:
    steps = result.steps
    assert steps["tokenise"]["fast_path_matches"] is True
    assert steps["tokenise"]["kinds"].count("oov") == 1
    score = dict(steps["score"])
    far = score.pop("far_human")
    for key, value in score.items():
        assert math.isfinite(value), key
    # human DNA of another chromosome, real vs dinucleotide-shuffled: the gap is their difference
    assert far["region"].startswith("chrX:") and far["n_bases"] == 12_000
    assert far["gap_exact"] == pytest.approx(far["real_exact"] - far["shuffled_exact"], abs=2e-4)
    rows = _tsv(result.out_dir / "scores.tsv")
    real = [r for r in rows if r["kind"] == "real"]
    n = sum(int(r["bp"]) for r in real)
    assert score["n_bases"] == n
    weighted = sum(float(r["markov6"]) * int(r["bp"]) for r in real) / n
    assert score["real_markov6"] == pytest.approx(weighted, abs=1e-3)
    # a Markov chain fitted on real DNA must find real held-out DNA likelier than shuffled DNA
    assert score["real_markov6"] > score["shuffled_markov6"]
    copy = steps["copy"]
    # a Markov chain has no memory beyond 6 bases: the second copy scores like the first
    assert copy["random_copy2_markov6"] == pytest.approx(copy["random_copy1_markov6"], abs=0.05)
    niah = copy["niah"]
    assert niah["n"] == 10 and 0 <= niah["exact_match"] <= niah["base_accuracy"] <= 1
    gen = steps["generate"]
    assert 0 < gen["greedy_distinct_6mers"] <= 295 and 0 < gen["sampled_distinct_6mers"] <= 295
    assert steps["triplet_expansion"]["carbon_3b_accuracy"] == 0.852


def test_finetune_step_compares_probe_and_baseline(result: DemoResult) -> None:
    """The fine-tuning step's table holds both labels, its numbers are the run's metrics.json's,
    and the task table holds every row it trained and tested on."""
    out = result.out_dir
    rows = _tsv(out / "finetune.tsv")
    assert [r["label"] for r in rows] == ["activity", "gc"]
    metrics = json.loads((out / "finetune" / "metrics.json").read_text())
    for row in rows:
        model = metrics["model"]["test"]["per_target"][row["label"]]["pearson"]
        base = metrics["baseline"]["metrics"]["test"]["per_target"][row["label"]]["pearson"]
        assert float(row["probe_test_pearson"]) == pytest.approx(model, abs=1e-4)
        assert float(row["kmer_baseline_test_pearson"]) == pytest.approx(base, abs=1e-4)
        assert result.steps["finetune"]["pearson"][row["label"]]["probe_test_pearson"] == pytest.approx(
            model, abs=1e-4
        )
    task = _tsv(out / "motif_task.tsv")
    step = result.steps["finetune"]
    assert len(task) == step["rows"] and metrics["split"]["test"] == step["test_rows"] > 0
    assert len(_tsv(out / "finetune" / "predictions.tsv")) == step["rows"]
    # the labels are what the task says: planted sites + noise, the GC fraction of the window
    assert all(
        float(r["gc"]) == pytest.approx((r["sequence"].count("G") + r["sequence"].count("C")) / 120, abs=1e-4)
        for r in task
    )
    assert all(r["sequence"].count("TGACTCA") >= 1 for r in task if r["has_motif"] == "1")
    # a k-mer ridge reads a planted motif's count (test Pearson > 0.6 even on 240 training rows)
    assert float(rows[0]["kmer_baseline_test_pearson"]) > 0.6


def test_cli_demo_json_and_out(tiny_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "tour"
    res = run_ok(["demo", "--model", str(tiny_folder), "--out", str(out), "--json"])
    summary = json.loads(res.stdout)
    assert Path(summary["out_dir"]) == out.resolve()
    assert (out / "summary.json").is_file() and (out / "copy_test.png").is_file()


def test_cli_demo_out_must_be_a_folder(tiny_folder: Path, tmp_path: Path) -> None:
    clash = tmp_path / "file"
    clash.write_text("x")
    res = run(["demo", "--model", str(tiny_folder), "--out", str(clash)])
    assert res.exit_code == 2
