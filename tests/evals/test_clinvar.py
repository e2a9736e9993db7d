"""ClinVar next-base tasks: context, full-vocabulary first-base marginal, FNS level, metrics."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from sklearn.metrics import auc, precision_recall_curve, roc_auc_score

from hexamer import Carbon
from hexamer.evals.runner import run_task
from hexamer.evals.task import EvalContext
from hexamer.evals.tasks.clinvar import ClinVarCoding, ClinVarNonCoding, acgt_first_base_ids, clinvar_context
from hexamer.tokenizer import CarbonTokenizer
from hexamer.vep.recipes import naive_next_base_scores
from tests.evals.lookalike import write_clinvar

transformers = pytest.importorskip("transformers")
CTX = 600


@pytest.fixture(scope="module")
def genome(human_dna: str, lambda_dna: str) -> dict[str, str]:
    return {"20": human_dna[:6000], "X": "N" * 400 + lambda_dna[:4000]}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory, genome: dict[str, str]) -> Path:
    return write_clinvar(tmp_path_factory.mktemp("clinvar"), genome, n=12)


def test_context_strips_n_and_cuts_from_the_left() -> None:
    assert clinvar_context("NNNNACGTACGTA") == "GTACGTA"[-6:]
    assert clinvar_context("ACGTAC" * 3) == "ACGTAC" * 3
    assert clinvar_context("NNN") == ""


def test_acgt_vocabulary_follows_get_vocab(real_tok: CarbonTokenizer) -> None:
    groups = acgt_first_base_ids(real_tok.get_vocab())
    ids = {i for g in groups.values() for i in g}
    layout = real_tok.layout
    kmer_ids = set(range(layout.kmer_start, layout.kmer_stop))
    assert len(kmer_ids - ids) == 1 and layout.kmer_id("CCCCCC") not in ids  # shadowed by the BPE 'CCCCCC'
    bpe = ids - kmer_ids
    assert bpe and all(set(real_tok.id_to_token(i)) <= set("ACGT") for i in bpe)
    assert real_tok.token_to_id("A") in groups["A"]


def _records(task, data_dir: Path, carbon: Carbon, level: str) -> list[dict]:
    task.configure({"context_length": CTX, "hg38": None})
    examples = task.load(data_dir)
    ctx = EvalContext(carbon=carbon, level=level, batch_size=3, options={"context_length": CTX})
    return sorted(task.score(examples, ctx), key=lambda r: r["row"])


def _context(genome: dict[str, str], chrom: str, pos: int) -> str:
    return clinvar_context(genome[chrom][max(0, pos - 1 - CTX) : pos - 1])


def test_token_level_is_full_vocab_marginal(
    data_dir: Path, carbon: Carbon, tiny_folder: Path, genome
) -> None:
    records = _records(ClinVarCoding(), data_dir, carbon, "token")
    hf = transformers.LlamaForCausalLM.from_pretrained(tiny_folder, dtype=torch.float32).eval()
    vocab = carbon.tokenizer.get_vocab()
    for rec in records[:5]:
        ids = carbon.tokenizer.encode("<dna>" + _context(genome, rec["chrom"], rec["pos"]))
        with torch.no_grad():
            probs = torch.softmax(hf(torch.tensor([ids])).logits[0, -1].double(), -1)
        mass = {
            b: sum(float(probs[i]) for t, i in vocab.items() if t and set(t) <= set("ACGT") and t[0] == b)
            for b in "ACGT"
        }
        assert rec["p_ref"] == pytest.approx(mass[rec["ref"]], rel=1e-5)
        assert rec["score"] == pytest.approx(np.log(mass[rec["ref"]] / (mass[rec["alt"]] + 1e-10)), abs=1e-5)
        assert rec["ref_match"] is True


def test_bp_level_is_the_vep_next_base_recipe(data_dir: Path, carbon: Carbon, genome) -> None:
    records = _records(ClinVarNonCoding(), data_dir, carbon, "bp")
    for rec in records[:5]:
        want = naive_next_base_scores(
            carbon, _context(genome, rec["chrom"], rec["pos"]), rec["ref"], [rec["alt"]]
        )[0]
        assert rec["score"] == pytest.approx(want, abs=1e-5)


def test_metrics_and_breakdowns(data_dir: Path, carbon: Carbon) -> None:
    result = run_task(
        ClinVarNonCoding(), data_dir, carbon, level="token", n_boot=30, options={"context_length": CTX}
    )
    rows = pq.read_table(data_dir / "non_coding" / "clinvar_non_coding.parquet").to_pylist()
    records = _records(ClinVarNonCoding(), data_dir, carbon, "token")
    y = np.array([rows[r["row"]]["label"] for r in records])
    s = np.array([r["score"] for r in records])
    assert result.metrics["auroc"] == pytest.approx(roc_auc_score(y, s))
    p, rc, _ = precision_recall_curve(y, s)
    assert result.metrics["auprc"] == pytest.approx(auc(rc, p))
    sub = np.array([rows[r["row"]]["region_subtype"] for r in records]) == "intronic"
    assert result.metrics["breakdowns.region_subtype=intronic.AUROC"] == pytest.approx(
        roc_auc_score(y[sub], s[sub])
    )
    assert result.summary["breakdowns"]["region_subtype=intronic"]["n"] == int(sub.sum())
    assert result.summary["context_length"] == CTX


def test_fasta_reference_gives_the_same_scores(
    tmp_path: Path, data_dir: Path, carbon: Carbon, genome
) -> None:
    fasta = tmp_path / "hg38.fa"
    fasta.write_text("".join(f">chr{c}\n{s}\n" for c, s in genome.items()))
    task = ClinVarCoding()
    task.configure({"hg38": str(fasta)})
    examples = task.load(data_dir)
    ctx = EvalContext(carbon=carbon, level="bp", batch_size=4, options={"context_length": CTX})
    via_fasta = sorted(task.score(examples, ctx), key=lambda r: r["row"])
    via_parquet = _records(ClinVarCoding(), data_dir, carbon, "bp")
    assert [r["score"] for r in via_fasta] == pytest.approx([r["score"] for r in via_parquet], abs=1e-6)


def test_missing_reference_and_unknown_chromosome(tmp_path: Path, data_dir: Path, carbon: Carbon) -> None:
    lone = tmp_path / "coding"
    lone.mkdir()
    (lone / "clinvar_coding.parquet").write_bytes(
        (data_dir / "coding" / "clinvar_coding.parquet").read_bytes()
    )
    with pytest.raises(FileNotFoundError, match="hg38"):
        ClinVarCoding().load(tmp_path)
    import pyarrow as pa

    pq.write_table(
        pa.Table.from_pylist([{"chrom": "7", "pos": 900, "ref": "A", "alt": "G", "label": 1}]),
        lone / "clinvar_coding.parquet",
    )
    task = ClinVarCoding()
    task.configure({"hg38": str(data_dir / "hg38.parquet")})
    recs = list(
        task.score(
            task.load(tmp_path), EvalContext(carbon=carbon, level="token", options={"context_length": CTX})
        )
    )
    assert "chr7" in recs[0]["error"] and recs[0]["score"] is None
