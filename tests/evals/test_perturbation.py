"""Triplet expansion and synonymous codon tasks: loaders, pairwise scoring and accuracy."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
import torch

from hexamer import Carbon
from hexamer.evals.registry import get_task
from hexamer.evals.task import DatasetSchemaError, EvalContext
from hexamer.evals.tasks import perturbation
from hexamer.evals.tasks.perturbation import SynonymousCodon, TripletExpansion, seq_hash
from hexamer.tokenizer.dna import encode_dna
from tests.evals.lookalike import write_parquet

# most frequent human codon per amino acid (a stand-in for the CoCoPUTs tables)
_BEST = {
    "GCT": "GCC",
    "GCA": "GCC",
    "GGT": "GGC",
    "GGA": "GGC",
    "CTT": "CTG",
    "TTA": "CTG",
    "AAA": "AAG",
    "GAA": "GAG",
    "GAT": "GAC",
    "TCT": "AGC",
    "CGT": "CGG",
    "ACT": "ACC",
    "GTT": "GTG",
    "TTT": "TTC",
}


def _cds_rows(dna: str, n: int, length: int, seed: int, kind: str) -> list[dict]:
    """Look-alike rows: a real slice (positive) and its CAG-patched or codon-optimised copy."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        start = rng.randrange(0, len(dna) - length)
        orig = dna[start : start + length]
        if kind == "motif":
            pert = orig[:60] + "CAG" * 10 + orig[90:]
        else:
            pert = "".join(_BEST.get(orig[i : i + 3], orig[i : i + 3]) for i in range(0, length, 3))
        assert len(pert) == len(orig)
        rows.append({"benchmark_id": "x", "species": "human", "original_sequence": orig, "sequence": pert})
    return rows


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory, human_dna: str, lambda_dna: str) -> Path:
    """``perturbation-bench`` in the Hub layout: CONFIG/test-00000-of-00001.parquet."""
    root = tmp_path_factory.mktemp("pb") / "perturbation-bench"
    configs = {  # config -> (DNA, rows, length, seed, kind)
        "motif_human": (human_dna, 7, 150, 1, "motif"),
        "syn_human": (human_dna, 6, 120, 2, "syn"),
        "syn_mouse": (lambda_dna, 4, 120, 3, "syn"),
    }
    for config, (dna, n, length, seed, kind) in configs.items():
        write_parquet(
            root / config / "test-00000-of-00001.parquet",
            _cds_rows(dna, n, length, seed, kind),
            row_group_size=3,
        )
    return root


def test_registry_names() -> None:
    assert isinstance(get_task("triplet"), TripletExpansion)
    assert isinstance(get_task("codon"), SynonymousCodon)
    assert get_task("triplet").reference["Carbon-3B"]["accuracy"] == pytest.approx(0.852)
    assert get_task("codon").reference["Evo2-7B"]["accuracy"] == pytest.approx(0.9159)


def test_load_hub_layout(bench: Path) -> None:
    ex = TripletExpansion().load(bench)
    assert len(ex) == 7 and {e["subset"] for e in ex} == {"motif_human"}
    codon = SynonymousCodon().load(bench)
    assert [e["subset"] for e in codon].count("syn_human") == 6
    assert [e["subset"] for e in codon].count("syn_mouse") == 4
    assert len({e["id"] for e in codon}) == 10
    # --limit takes N rows of each subset, like df.sample(N, random_state=seed)
    lim = SynonymousCodon().load(bench, limit=3, seed=5)
    assert len(lim) == 6
    want = np.random.RandomState(5).choice(6, 3, replace=False).tolist()
    assert [e["row"] for e in lim if e["subset"] == "syn_human"] == want
    # one config's folder, or one file, works too
    assert len(SynonymousCodon().load(bench / "syn_mouse")) == 4
    one = SynonymousCodon().load(bench / "syn_mouse" / "test-00000-of-00001.parquet")
    assert {e["subset"] for e in one} == {"syn_mouse"}


def test_load_old_input_column_and_csv(tmp_path: Path, human_dna: str) -> None:
    rows = _cds_rows(human_dna, 3, 60, 4, "syn")
    old = [{"original_sequence": r["original_sequence"], "input": r["sequence"]} for r in rows]
    path = write_parquet(tmp_path / "synonymous_codons" / "data.parquet", old, row_group_size=3)
    ex = SynonymousCodon().load(path)
    assert [e["neg"] for e in ex] == [r["sequence"] for r in rows]
    csv_path = tmp_path / "motif_human.csv"
    pacsv.write_csv(pa.Table.from_pylist(rows), csv_path)
    ex = TripletExpansion().load(tmp_path)  # finds motif_human.csv
    assert len(ex) == 3 and ex[0]["pos"] == rows[0]["original_sequence"]


def test_schema_error_lists_columns(tmp_path: Path) -> None:
    write_parquet(
        tmp_path / "motif_human" / "test.parquet",
        [{"original_sequence": "ACGT", "seq": "ACGA"}],
        row_group_size=3,
    )
    with pytest.raises(DatasetSchemaError) as err:
        TripletExpansion().load(tmp_path)
    msg = str(err.value)
    assert (
        "sequence (or input)" in msg and "original_sequence" in msg and "found: original_sequence, seq" in msg
    )


def test_missing_data_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="motif_human"):
        TripletExpansion().load(tmp_path / "empty")


def test_metrics_hand_computed() -> None:
    task = SynonymousCodon()
    recs = [
        {"id": "a", "subset": "syn_human", "pos_score": -1.0, "neg_score": -2.0, "correct": 1},
        {"id": "b", "subset": "syn_human", "pos_score": -1.5, "neg_score": -1.5, "correct": 0},  # tie: wrong
        {"id": "c", "subset": "syn_human", "pos_score": -3.0, "neg_score": -2.0, "correct": 0},
        {"id": "d", "subset": "syn_mouse", "pos_score": -1.0, "neg_score": -1.1, "correct": 1},
        {"id": "e", "subset": "syn_mouse", "correct": None, "error": "too long"},
    ]
    m = task.metrics(recs)
    assert m["accuracy"] == pytest.approx(2 / 4)  # pooled over the scored pairs
    assert m["accuracy_syn_human"] == pytest.approx(1 / 3)
    assert m["accuracy_syn_mouse"] == pytest.approx(1.0)
    assert m["accuracy_mean_subsets"] == pytest.approx((1 / 3 + 1) / 2)
    assert m["n"] == 5 and m["n_scored"] == 4 and m["n_errors"] == 1 and m["n_ties"] == 1
    assert m["mean_margin"] == pytest.approx(np.mean([1.0, 0.0, -1.0, 0.1]))


def test_scoring_with_stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pairing, strict '>' and hashes, with a known scorer: LL = -(number of 'CAG')."""
    calls: list[list[str]] = []

    def fake(carbon, seqs, *, level, batch_size=16, prefix="<dna>", on_error="raise"):
        calls.append(list(seqs))
        return np.array([-float(s.count("CAG")) for s in seqs])

    monkeypatch.setattr(perturbation, "sequence_loglik", fake)
    ex = [
        {"id": "0", "subset": "motif_human", "row": 0, "pos": "ATGAAATTT", "neg": "ATGCAGCAG"},  # 0 > -2
        {"id": "1", "subset": "motif_human", "row": 1, "pos": "CAGAAA", "neg": "AAACAG"},  # tie
        {"id": "2", "subset": "motif_human", "row": 2, "pos": "CAGCAG", "neg": "ATGAAA"},  # wrong
        {"id": "3", "subset": "motif_human", "row": 3, "pos": "", "neg": "ATG"},  # bad row
    ]
    recs = list(TripletExpansion().score(ex, EvalContext(carbon=None, level="token")))  # type: ignore[arg-type]
    assert [r["correct"] for r in recs] == [1, 0, 0, None]
    assert recs[3]["error"]
    assert recs[0]["pos_hash"] == hashlib.sha1(b"ATGAAATTT").hexdigest()[:16] == seq_hash("ATGAAATTT")
    assert recs[0]["neg_hash"] == hashlib.sha1(b"ATGCAGCAG").hexdigest()[:16]
    # all positives then all negatives, in one pass, each distinct string once
    assert calls == [["ATGAAATTT", "CAGAAA", "CAGCAG", "ATGCAGCAG", "AAACAG", "ATGAAA"]]
    assert TripletExpansion().metrics(recs)["accuracy"] == pytest.approx(1 / 3)


def _direct_token_ll(carbon: Carbon, seq: str) -> float:
    """Independent: one forward over <dna> + first floor(len/6)*6 bases, full-vocab log-softmax."""
    dna = seq[: len(seq) - len(seq) % 6]
    ids = [carbon.layout.begin_id, *encode_dna(dna, carbon.layout).ids.tolist()]
    with torch.inference_mode():
        logits = carbon.model(torch.tensor([ids]), logits_at="all").logits[0].double()
    logp = torch.log_softmax(logits, -1)
    return float(np.mean([logp[i - 1, ids[i]].item() for i in range(1, len(ids))]))


def test_end_to_end_tiny_model(bench: Path, carbon: Carbon, tmp_path: Path) -> None:
    task = SynonymousCodon()
    ex = task.load(bench, limit=2)
    recs = list(task.score(ex, EvalContext(carbon=carbon, level="token", batch_size=3)))
    assert len(recs) == len(ex) == 4
    for e, r in zip(ex, recs, strict=True):
        assert r["id"] == e["id"]
        assert r["pos_score"] == pytest.approx(_direct_token_ll(carbon, e["pos"]), abs=2e-4)
        assert r["neg_score"] == pytest.approx(_direct_token_ll(carbon, e["neg"]), abs=2e-4)
        assert r["correct"] == int(r["pos_score"] > r["neg_score"])
    bp = list(task.score(ex, EvalContext(carbon=carbon, level="bp", batch_size=3)))
    for e, r in zip(ex, bp, strict=True):
        want = carbon.score(e["pos"], level="bp").mean
        assert r["pos_score"] == pytest.approx(want, abs=1e-5)
    m = task.metrics(recs)
    assert m["accuracy"] == pytest.approx(np.mean([r["correct"] for r in recs]))
    plots = task.plots(recs, tmp_path / "plots")
    assert plots and plots[0].read_bytes()[:4] == b"\x89PNG"


def test_too_long_sequence_is_an_error_record(carbon: Carbon, human_dna: str) -> None:
    long = human_dna[: 6 * (carbon.context_length + 10)]
    ex = [{"id": "x", "subset": "motif_human", "row": 0, "pos": long, "neg": long[::-1]}]
    (rec,) = TripletExpansion().score(ex, EvalContext(carbon=carbon, level="token"))
    assert rec["correct"] is None and "context" in rec["error"]


def test_subsets_option(bench: Path) -> None:
    task = SynonymousCodon()
    task.configure({"subsets": "syn_mouse"})
    assert {e["subset"] for e in task.load(bench)} == {"syn_mouse"}
    task.configure({"subsets": "all"})
    assert len(task.load(bench)) == 10
    with pytest.raises(ValueError, match="unknown subset"):
        task.configure({"subsets": "syn_fly"})
