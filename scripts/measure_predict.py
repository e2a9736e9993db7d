"""Time ``hexamer predict``'s library on the shipped demo model with a random regression head:
sequences per second (random 200-bp records to Parquet) and variant effects per second (random SNVs
of the chr20 test slice, 200-bp windows). Usage: ``python scripts/measure_predict.py [OUT_DIR]``."""

from __future__ import annotations

import random
import sys
import tempfile
import time
from pathlib import Path

import torch

from hexamer.finetune.apply import Predictor, predict_records, write_predictions
from hexamer.finetune.effects import run_effects
from hexamer.finetune.folders import new_classifier, save_classifier
from hexamer.finetune.head import HeadSettings
from hexamer.finetune.task import TaskSpec
from hexamer.finetune.transform import LabelTransform
from hexamer.synthetic.vcf import write_random_vcf

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "hexamer" / "data" / "demo-model"
FASTA = ROOT / "tests" / "data" / "vep" / "chr20_slice.fa.gz"


def main(out: Path, n_seqs: int = 2000, n_snvs: int = 500, threads: int = 2) -> None:
    torch.set_num_threads(threads)
    task = TaskSpec("regression", ("activity",))
    transform = LabelTransform("zscore", ("activity",), (0.0,), (1.0,))
    settings = HeadSettings(task, label_transform=transform.to_json(), max_length=200)
    folder = save_classifier(new_classifier(DEMO, settings), out / "head")
    predictor = Predictor.load(folder, batch_size=32)
    rng = random.Random(0)
    fasta = out / "seqs.fa"
    fasta.write_text("".join(f">s{i}\n{''.join(rng.choices('ACGT', k=200))}\n" for i in range(n_seqs)))
    t = time.perf_counter()
    write_predictions(out / "pred.parquet", predictor, predict_records(predictor, fasta))
    dt = time.perf_counter() - t
    print(f"sequences: {n_seqs} x 200 bp in {dt:.1f} s ({n_seqs / dt:.0f}/s)")
    vcf = out / "snvs.vcf"
    write_random_vcf(FASTA, vcf, n_sites=n_snvs, region=("20", 100_000, 400_000), seed=1)
    t = time.perf_counter()
    result = run_effects(predictor, vcf, FASTA, out / "effects.tsv", on_note=lambda _: None)
    dt = time.perf_counter() - t
    print(
        f"variant effects: {n_snvs} SNVs, 200-bp windows in {dt:.1f} s ({n_snvs / dt:.0f}/s) {result.status_counts}"
    )


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(Path(tmp))
