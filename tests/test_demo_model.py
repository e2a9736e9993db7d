"""The shipped demo model: it loads, scores, generates, and its README tells the truth."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch

from hexamer import Carbon
from hexamer.demo import demo_data_files, demo_model_path
from hexamer.model import load_model
from hexamer.tokenizer import CarbonTokenizer
from hexamer.train.data import load_corpus, validation_windows
from hexamer.train.evaluate import evaluate_model

README = demo_model_path() / "README.md"


def _readme_number(label: str) -> float:
    """The bold number on the README line starting with ``label`` (e.g. ``- Held-out ...: **0.31**``)."""
    match = re.search(rf"^- {re.escape(label)}[^*]*?\*\*([0-9.]+)\*\*", README.read_text(), re.MULTILINE)
    assert match, f"no '{label}' line with a bold number in {README}"
    return float(match.group(1))


@pytest.fixture(scope="module")
def carbon() -> Carbon:
    return Carbon.from_pretrained(demo_model_path())


def test_demo_folder_is_a_small_carbon_checkpoint() -> None:
    folder = demo_model_path()
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert (folder / "model.safetensors").stat().st_size < 8 * 2**20
    assert not (folder / "optimizer.safetensors").exists()
    tok = CarbonTokenizer.from_pretrained(folder)
    assert tok.encode("<dna>ATCGAT</dna>")[1] == tok.layout.kmer_id("ATCGAT")
    assert [p.name for p in demo_data_files()] == [
        "ecoli_mg1655.fa.gz",
        "human_chr20.fa.gz",
        "lambda_phage.fa.gz",
        "saureus_n315.fa.gz",
    ]


def test_demo_model_scores_and_generates(carbon: Carbon) -> None:
    assert carbon.model.dtype == torch.float32  # stored in half precision, upcast on the CPU
    real = "ATGAGCACAATTGAAGAGCAGCTGAAGGCGCTGCGTGAAGAGCTGGAAGCGCTGGAAGCG"
    score = carbon.score(real)
    assert score.n_scored == len(real) and score.mean > -1.45
    gen = carbon.generate("ATGAAACGCATTAGCACCACC", max_bp=60, temperature=0.8, top_p=0.95, seed=0)
    assert len(gen.sequence) == 60 and set(gen.sequence) <= set("ACGT")
    again = carbon.generate("ATGAAACGCATTAGCACCACC", max_bp=60, temperature=0.8, top_p=0.95, seed=0)
    assert again.sequence == gen.sequence


def test_readme_accuracy_is_reproducible() -> None:
    """The README's quick-check number is recomputed exactly; the full held-out number and the
    baseline it must beat are checked for consistency with it."""
    quick = _readme_number("Quick check")
    full = _readme_number("Held-out per-base accuracy")
    baseline = _readme_number("0-th order baseline")
    model, _ = load_model(demo_model_path())
    tok = CarbonTokenizer.from_pretrained(demo_model_path())
    corpus = load_corpus([str(p) for p in demo_data_files()], val_fraction=0.1)
    windows = validation_windows(corpus.val, 6000, max_bp=20_000)  # the first window of each genome
    res = evaluate_model(model, tok, windows, batch_size=4)
    assert res.n_bases == 22_850
    assert res.accuracy == pytest.approx(quick, abs=5e-4)
    assert abs(res.accuracy - full) < 0.03
    assert full > baseline + 0.01
    assert np.isfinite(res.bp_loss)
