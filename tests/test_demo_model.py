"""The shipped demo model: it loads, scores, generates, copies from context, and its README tells
the truth (its quick-check figures are recomputed here; the baselines come from the trainer's own
evaluator)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from hexamer import Carbon
from hexamer.demo import demo_data_files, demo_model_path
from hexamer.demo.heldout import model_accuracy
from hexamer.demo.markov import acgt_codes
from hexamer.model import load_model
from hexamer.tokenizer import CarbonTokenizer
from hexamer.train.data import load_corpus, validation_windows
from hexamer.train.evaluate import evaluate_model, markov_accuracy

README = demo_model_path() / "README.md"
ORIGINAL = ("ecoli_mg1655.fa.gz", "human_chr20.fa.gz", "lambda_phage.fa.gz", "saureus_n315.fa.gz")


def _readme_number(label: str) -> float:
    """The bold number on the README line starting with ``label`` (e.g. ``- Held-out ...: **0.31**``)."""
    match = re.search(rf"^- {re.escape(label)}[^*]*?\*\*(-?[0-9.]+)\*\*", README.read_text(), re.MULTILINE)
    assert match, f"no '{label}' line with a bold number in {README}"
    return float(match.group(1))


@pytest.fixture(scope="module")
def carbon() -> Carbon:
    return Carbon.from_pretrained(demo_model_path())


@pytest.fixture(scope="module")
def quick_windows() -> list[tuple[str, str]]:
    """The first held-out window of each of the four original genomes (22,850 bases)."""
    files = [str(p) for p in demo_data_files() if p.name in ORIGINAL]
    return validation_windows(load_corpus(files, val_fraction=0.1).val, 6000, max_bp=20_000)


def test_demo_folder_is_a_small_carbon_checkpoint() -> None:
    folder = demo_model_path()
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert (folder / "model.safetensors").stat().st_size < 12 * 2**20
    assert not (folder / "optimizer.safetensors").exists()
    data = folder.parent
    assert sum(p.stat().st_size for p in data.rglob("*") if p.is_file()) < 20 * 2**20
    tok = CarbonTokenizer.from_pretrained(folder)
    assert tok.encode("<dna>ATCGAT</dna>")[1] == tok.layout.kmer_id("ATCGAT")
    names = [p.name for p in demo_data_files()]
    assert set(ORIGINAL) <= set(names) and len(names) == 9
    assert all(Path(p).stat().st_size < 1 * 2**20 for p in demo_data_files())


def test_demo_model_scores_and_generates(carbon: Carbon) -> None:
    assert carbon.model.dtype == torch.float32  # stored in half precision, upcast on the CPU
    real = "ATGAGCACAATTGAAGAGCAGCTGAAGGCGCTGCGTGAAGAGCTGGAAGCGCTGGAAGCG"
    score = carbon.score(real)
    assert score.n_scored == len(real) and score.mean > -1.45
    gen = carbon.generate("ATGAAACGCATTAGCACCACC", max_bp=60, temperature=0.8, top_p=0.95, seed=0)
    assert len(gen.sequence) == 60 and set(gen.sequence) <= set("ACGT")
    again = carbon.generate("ATGAAACGCATTAGCACCACC", max_bp=60, temperature=0.8, top_p=0.95, seed=0)
    assert again.sequence == gen.sequence


def test_readme_accuracy_is_reproducible(carbon: Carbon, quick_windows: list[tuple[str, str]]) -> None:
    """The README's quick-check numbers are recomputed exactly, with the trainer's evaluator (FNS)
    and with the exact within-token conditionals; the full held-out numbers must agree with them."""
    model, _ = load_model(demo_model_path())
    tok = CarbonTokenizer.from_pretrained(demo_model_path())
    res = evaluate_model(model, tok, quick_windows, batch_size=4)
    assert res.n_bases == 22_850
    assert res.accuracy == pytest.approx(_readme_number("Quick check, FNS marginals"), abs=5e-4)
    ours = model_accuracy(carbon, quick_windows)["all"]
    assert ours["n"] == 22_850
    assert ours["fns_accuracy"] == pytest.approx(res.accuracy, abs=2e-4)  # two code paths, one answer
    assert ours["exact_accuracy"] == pytest.approx(
        _readme_number("Quick check, exact conditionals"), abs=5e-4
    )
    full_fns = _readme_number("Held-out per-base accuracy, FNS marginals")
    full_exact = _readme_number("Held-out per-base accuracy, exact conditionals")
    assert abs(res.accuracy - full_fns) < 0.03 and abs(ours["exact_accuracy"] - full_exact) < 0.03
    assert np.isfinite(res.bp_loss)


def test_exact_conditionals_beat_the_next_base_markov_chain(quick_windows: list[tuple[str, str]]) -> None:
    """The README's headline claim, with the Markov figure recomputed by the trainer's evaluator."""
    files = [str(p) for p in demo_data_files() if p.name in ORIGINAL]
    corpus = load_corpus(files, val_fraction=0.1)
    windows = validation_windows(corpus.val, 6000)
    markov6 = markov_accuracy(corpus.train, windows, order=6, aligned=False)
    assert markov6 == pytest.approx(_readme_number("Markov, next base"), abs=5e-5)
    assert _readme_number("Held-out per-base accuracy, exact conditionals") > markov6 + 0.01


def test_copy_test_figures(carbon: Carbon) -> None:
    """A random 600-bp sequence written twice: the README's figures for both copies are recomputed.
    The model copies from context: the second copy scores far better than the first (at least
    -0.5 nats/base; -1.386 is knowing nothing, 0 perfect copying)."""
    rng = np.random.default_rng(7)
    unit = "".join(rng.choice(list("ACGT"), 600))
    seq = unit + unit
    lp = carbon.base_logprobs(seq, method="exact")
    true = lp[np.arange(len(seq)), acgt_codes(seq)]
    first, second = float(true[:600].mean()), float(true[600:].mean())
    assert first == pytest.approx(_readme_number("Copy test, first copy"), abs=2e-3)
    assert second == pytest.approx(_readme_number("Copy test, second copy"), abs=2e-3)
    assert second >= -0.5 and second > first + 0.5


def test_real_dna_beats_shuffled(carbon: Carbon, quick_windows: list[tuple[str, str]]) -> None:
    import random

    real = "".join(b for _, b in quick_windows)
    shuffled = "".join(random.Random(0).sample(real, len(real)))
    a, b = carbon.score([real[:6000], shuffled[:6000]], method="exact")
    assert a.mean > b.mean + 0.02  # type: ignore[union-attr]


def _card_pair(label: str) -> tuple[float, float]:
    """The two bold numbers on the README line starting with ``label``."""
    line = next((ln for ln in README.read_text().splitlines() if ln.startswith(f"- {label}")), None)
    assert line, f"no '{label}' line in {README}"
    a, b = (float(x) for x in re.findall(r"\*\*(-?[0-9.]+)\*\*", line)[:2])
    return a, b


def test_far_human_real_vs_shuffled_matches_the_card(carbon: Carbon) -> None:
    """Human DNA of another chromosome (never trained on), real vs dinucleotide-shuffled: the card's
    figures for the first two windows (the demo's) are recomputed."""
    from hexamer.demo.context import far_human_windows, real_vs_shuffled

    res = real_vs_shuffled(carbon, far_human_windows(max_windows=2))
    real, shuffled = _card_pair("Far human, first 12,000 bp (the demo's), real / shuffled")
    assert res["real_exact"] == pytest.approx(real, abs=2e-3)
    assert res["shuffled_exact"] == pytest.approx(shuffled, abs=2e-3)


@pytest.mark.slow
def test_far_human_figures_match_the_card(carbon: Carbon) -> None:
    """The whole far region (48,000 bp), recomputed."""
    from hexamer.demo.context import far_human_windows, real_vs_shuffled

    res = real_vs_shuffled(carbon, far_human_windows())
    assert res["gap_exact"] == pytest.approx(
        _readme_number("Far human, real minus dinucleotide-shuffled (exact)"), abs=3e-3
    )
    assert res["gap_fns"] == pytest.approx(
        _readme_number("Far human, real minus dinucleotide-shuffled (FNS)"), abs=3e-3
    )
    assert res["gap_exact"] >= 0.08  # the model knows real DNA it never saw


def test_planted_value_retrieval_matches_the_card_and_succeeds_on_most_rows(carbon: Carbon) -> None:
    """Genome-NIAH's plain task at the model's 1,024-token context, the card's 20 rows (seconds)."""
    from hexamer.demo.context import far_human_file, planted_value_retrieval

    niah = planted_value_retrieval(carbon, far_human_file(), n=20)
    assert niah["exact_match"] == pytest.approx(
        _readme_number("Planted-value retrieval, exact match"), abs=0.051
    )
    assert niah["exact_match"] > 0.5


@pytest.mark.slow
def test_best_markov_chain_of_orders_4_to_10_matches_the_card() -> None:
    """The card's best next-base chain (orders 4-10, fitted on the model's whole training split,
    scored on the original held-out set), recomputed with the trainer's evaluator."""
    corpus = load_corpus([str(p) for p in demo_data_files()], val_fraction=0.1)
    held = load_corpus([str(p) for p in demo_data_files() if p.name in ORIGINAL], val_fraction=0.1)
    windows = validation_windows(held.val, 6000)
    best = max(markov_accuracy(corpus.train, windows, order=k, aligned=False) for k in range(4, 11))
    assert best == pytest.approx(_readme_number("Best Markov chain, orders 4–10"), abs=5e-4)
    # the card's held-out accuracy beats every one of them, with FNS marginals and exact conditionals
    # (test_readme_accuracy_is_reproducible ties those figures to the shipped weights)
    assert _readme_number("Held-out per-base accuracy, FNS marginals") > best
    assert _readme_number("Held-out per-base accuracy, exact conditionals") > best
