"""Sequence recovery: prompt construction, the /30 metric, greedy decoding against transformers."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch

from hexamer import Carbon
from hexamer.bench.common import kmer_only_processor
from hexamer.evals.data import row_hash
from hexamer.evals.runner import run_task
from hexamer.evals.task import EvalContext
from hexamer.evals.tasks.sequence_recovery import SequenceRecovery, recovery_accuracy, sr_context
from tests.evals.lookalike import write_sequence_recovery

transformers = pytest.importorskip("transformers")


def test_accuracy_always_divides_by_30() -> None:
    label = "ACGT" * 10
    assert recovery_accuracy(label, label) == 1.0
    assert recovery_accuracy(label, label[:12]) == pytest.approx(12 / 30)  # short prediction penalised
    assert recovery_accuracy(label, "") == 0.0
    assert recovery_accuracy(label[:6], label) == pytest.approx(6 / 30)
    assert recovery_accuracy("AAAAAAAAAA" + "C" * 30, "AAAAATAAAA" + "C" * 30) == pytest.approx(29 / 30)


def test_context_is_rightmost_and_whole_kmers() -> None:
    seq = "".join("ACGT"[i % 4] for i in range(1000))
    assert sr_context(seq, 6144) == seq[4:]  # 1000 -> 996, cut from the left
    ctx = sr_context(seq, 100)
    assert ctx == seq[-96:] and len(ctx) % 6 == 0


def test_token_level_matches_transformers_greedy(
    tmp_path: Path, tiny_folder: Path, carbon: Carbon, human_dna: str
) -> None:
    path = write_sequence_recovery(tmp_path, human_dna, n=6, ctx=200)
    task = SequenceRecovery()
    result = run_task(
        task, tmp_path / "sequence-recovery", carbon, level="token", n_boot=20, options={"max_seq_len": 150}
    )
    rows = pq.read_table(path).to_pylist()
    hf = transformers.LlamaForCausalLM.from_pretrained(tiny_folder, dtype=torch.float32).eval()
    layout = carbon.layout
    examples = task.load(tmp_path / "sequence-recovery")
    ctx = EvalContext(carbon=carbon, level="token", batch_size=4, options={"max_seq_len": 150, "gen_len": 5})
    records = {r["id"]: r for r in task.score(examples, ctx)}
    total = 0.0
    for i, row in enumerate(rows):
        rec = records[row_hash(row["sequence"], i)]
        context = row["sequence"][-150:]
        context = context[len(context) % 6 :]
        ids = torch.tensor([carbon.tokenizer.encode("<dna>" + context)])
        out = hf.generate(
            ids,
            max_new_tokens=5,
            do_sample=False,
            logits_processor=[kmer_only_processor(layout.kmer_start, layout.kmer_stop)],
        )
        pred = "".join(layout.kmer_of(t) for t in out[0, ids.shape[1] :].tolist())
        assert rec["pred"] == pred
        matches = sum(a == b for a, b in zip(row["label"][:30], pred[:30], strict=False))
        assert rec["accuracy"] == pytest.approx(matches / 30)
        total += matches / 30
    assert result.metrics["accuracy"] == pytest.approx(total / len(rows))
    by_type = {}
    for i, row in enumerate(rows):
        by_type.setdefault(row["type"], []).append(records[row_hash(row["sequence"], i)]["accuracy"])
    for t, accs in by_type.items():
        assert result.metrics[f"type_accuracy.{t}"] == pytest.approx(sum(accs) / len(accs))
    assert result.summary["overall_accuracy"] == result.metrics["accuracy"]
    assert set(result.summary["type_accuracy"]) == set(by_type)


def test_bp_level_is_carbon_bp_greedy(tmp_path: Path, carbon: Carbon, human_dna: str) -> None:
    write_sequence_recovery(tmp_path, human_dna, n=3, ctx=120)
    task = SequenceRecovery()
    examples = task.load(tmp_path / "sequence-recovery")
    ctx = EvalContext(carbon=carbon, level="bp", batch_size=4, options={"max_seq_len": 6144, "gen_len": 5})
    for e, rec in zip(examples, task.score(examples, ctx), strict=True):
        context = e["sequence"][len(e["sequence"]) % 6 :]
        assert rec["pred"] == carbon.generate(context, max_bp=30, mode="bp", temperature=0).sequence
        assert len(rec["pred"]) == 30


def test_split_option_picks_the_folder(tmp_path: Path, human_dna: str) -> None:
    write_sequence_recovery(tmp_path, human_dna, n=2)
    (tmp_path / "sequence-recovery" / "eukaryote").rename(tmp_path / "sequence-recovery" / "bacteria")
    task = SequenceRecovery()
    task.configure({"data_type": "bacteria"})
    assert len(task.load(tmp_path / "sequence-recovery")) == 2
    task.configure({"data_type": "eukaryote"})
    with pytest.raises(FileNotFoundError):
        task.load(tmp_path / "sequence-recovery")
