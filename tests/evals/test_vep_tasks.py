"""BRCA2 and TraitGym on look-alike files: the delta convention, rev-comp averaging, metrics."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sklearn.metrics import auc, average_precision_score, precision_recall_curve, roc_auc_score

from hexamer import Carbon
from hexamer.evals.runner import run_task
from hexamer.evals.scoring import sequence_loglik
from hexamer.evals.task import DatasetSchemaError, EvalContext
from hexamer.evals.tasks.vep_tasks import Brca2, TraitGymMendelian, crop_windows, variant_index
from hexamer.io import reverse_complement
from tests.evals.lookalike import write_brca2, write_traitgym


def test_crop_windows_keeps_the_variant_centred() -> None:
    ref = "ACGT" * 50
    var = ref[:120] + "T" + ref[121:]
    assert variant_index(ref, var) == 120
    r, v = crop_windows(ref, var, 60)
    assert len(r) == len(v) == 60 and variant_index(r, v) == 30 and r == ref[90:150]
    r, v = crop_windows(ref, ref[:5] + "G" + ref[6:], 60)  # near the start: shifted inwards
    assert r == ref[:60] and variant_index(r, v) == 5
    assert crop_windows(ref, var, 1000) == (ref, var)


def test_brca2_delta_and_metrics(tmp_path: Path, carbon: Carbon, human_dna: str) -> None:
    path = write_brca2(tmp_path, human_dna, n=16, window=300)
    task = Brca2()
    result = run_task(task, path.parent, carbon, level="token", n_boot=50)
    records = _records(task, path, carbon)  # the same records the run scored
    rows = pq.read_table(path).to_pylist()
    # LL(var) - LL(ref) with the mean full-vocabulary log-likelihood, computed directly
    for rec in records[:4]:
        row = rows[rec["row"]]
        ref_ll, var_ll = sequence_loglik(carbon, [row["ref_seq"], row["var_seq"]], level="token")
        assert rec["delta"] == pytest.approx(var_ll - ref_ll, abs=1e-9)
    labelled = [r for r in records if r["class"] in ("LOF", "FUNC/INT")]
    assert len(labelled) == len(records) - 1  # the VUS row is scored, not counted
    y = np.array([r["class"] == "LOF" for r in labelled], dtype=int)
    score = -np.array([r["delta"] for r in labelled])
    m = result.metrics
    assert m["auroc"] == pytest.approx(roc_auc_score(y, score))
    p, rc, _ = precision_recall_curve(y, score)
    assert m["auprc"] == pytest.approx(auc(rc, p))
    assert m["auprc_by_chrom_weighted"] == pytest.approx(average_precision_score(y, score))  # one chromosome
    from scipy.stats import spearmanr

    sc = [(rows[r["row"]]["score"], r["delta"]) for r in records if rows[r["row"]]["score"] is not None]
    assert m["spearman_score_vs_delta"] == pytest.approx(spearmanr(*zip(*sc, strict=True)).statistic)
    assert result.summary["AUROC"] == m["auroc"] and result.summary["num_variants"] == 16
    lo, hi = result.ci["auroc"]
    assert lo <= m["auroc"] <= hi


def _records(task, path: Path, carbon: Carbon, level: str = "token", **options) -> list[dict]:
    examples = task.load(path.parent)
    ctx = EvalContext(carbon=carbon, level=level, batch_size=4, options={**task.default_options, **options})
    return sorted(task.score(examples, ctx), key=lambda r: r["row"])


def test_traitgym_rev_comp_average_and_by_chrom(tmp_path: Path, carbon: Carbon, human_dna: str) -> None:
    path = write_traitgym(tmp_path, human_dna, n=18, window=240)
    task = TraitGymMendelian()
    records = _records(task, path, carbon, level="bp")
    rows = pq.read_table(path).to_pylist()
    row = rows[records[0]["row"]]
    seqs = [
        row["ref_seq"],
        row["var_seq"],
        reverse_complement(row["ref_seq"]),
        reverse_complement(row["var_seq"]),
    ]
    a, b, c, d = sequence_loglik(carbon, seqs, level="bp")
    assert records[0]["delta"] == pytest.approx(((b - a) + (d - c)) / 2, abs=1e-9)
    m = task.metrics(records)
    y = np.array([r["label"] for r in rows])[[r["row"] for r in records]]
    score = -np.array([r["delta"] for r in records])
    chrom = np.array([r["chrom"] for r in rows])[[r["row"] for r in records]]
    want = sum(
        (chrom == c).sum() * average_precision_score(y[chrom == c], score[chrom == c]) for c in set(chrom)
    )
    assert m["auprc_by_chrom_weighted"] == pytest.approx(want / len(y))
    assert np.isnan(m["spearman_score_vs_delta"])  # Mendelian scores are all null
    no_rc = _records(task, path, carbon, level="bp", rev_comp_avg=False)
    assert no_rc[0]["delta"] == pytest.approx(b - a, abs=1e-9)


def test_windows_too_long_are_cropped_with_a_note(tmp_path: Path, carbon: Carbon, human_dna: str) -> None:
    fits = 6 * (carbon.context_length - 1)
    path = write_brca2(tmp_path, human_dna, n=3, window=fits + 600)
    task = Brca2()
    ctx = EvalContext(carbon=carbon, level="token", batch_size=4, options={"window": None})
    records = list(task.score(task.load(path.parent), ctx))
    assert all(r["delta"] is not None for r in records)
    assert any("cropped" in n for n in ctx.notes)


def test_bad_rows_become_error_records(tmp_path: Path, carbon: Carbon) -> None:
    path = tmp_path / "brca2_vep.parquet"
    rows = [
        {
            "chrom": 13,
            "pos": 1,
            "ref": "A",
            "alt": "G",
            "class": "LOF",
            "ref_seq": "ACGTAC" * 10,
            "var_seq": "GCGTAC" * 10,
        },
        {"chrom": 13, "pos": 2, "ref": "A", "alt": "G", "class": "LOF", "ref_seq": None, "var_seq": "ACGT"},
    ]
    pq.write_table(pa.Table.from_pylist(rows), path)
    records = _records(Brca2(), path, carbon)
    assert records[0].get("error") is None and records[1]["error"]
    pq.write_table(pa.Table.from_pylist([{"chrom": 1, "pos": 1}]), path)
    with pytest.raises(DatasetSchemaError, match="ref_seq"):
        Brca2().load(path)
