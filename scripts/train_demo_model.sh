#!/usr/bin/env bash
# Rebuild the built-in demo model (hexamer/data/demo-model) from the DNA shipped in hexamer/data/dna.
#
#   scripts/train_demo_model.sh            # train (~45 CPU-minutes on one core), install, print the README numbers
#
# Environment: HEXAMER (command, default `hexamer`), PYTHON (default .venv/bin/python or python3),
# RUN_DIR (training folder, default /tmp/hexamer-demo-run), THREADS (torch CPU threads, default 1:
# a small model trains about as fast on one thread, and two threads collapse when the machine is busy).
set -euo pipefail
cd "$(dirname "$0")/.."

HEXAMER=${HEXAMER:-hexamer}
PYTHON=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
RUN_DIR=${RUN_DIR:-/tmp/hexamer-demo-run}
THREADS=${THREADS:-1}
DEST=hexamer/data/demo-model

rm -rf "$RUN_DIR"
start=$(date +%s)
# shellcheck disable=SC2086  # HEXAMER may be a command with arguments
$HEXAMER train hexamer/data/dna/*.fa.gz \
    --output-dir "$RUN_DIR" --init tiny \
    --hidden-size 256 --num-layers 4 --num-heads 4 --num-kv-heads 2 --intermediate-size 768 \
    --context-length 1024 --window-bp 6000 --val-fraction 0.1 --rc-prob 0.5 \
    --steps 1800 --batch-size 4 --lr 3e-3 --warmup-steps 50 --schedule cosine --min-lr-ratio 0.1 \
    --objective staged --fns-start 0.85 \
    --eval-every 200 --val-max-bp 120000 --log-every 10 --save-every 300 --keep-checkpoints 3 \
    --save-dtype float16 --seed 0 --threads "$THREADS" --device cpu
echo "training wall time: $(( $(date +%s) - start )) s"

# install the final folder (model + tokenizer; the README is written by hand from the numbers below)
for f in config.json generation_config.json model.safetensors tokenizer.json tokenizer_config.json \
         dna_config.json special_tokens_map.json added_tokens.json; do
    cp "$RUN_DIR/final/$f" "$DEST/$f"
done
cp "$RUN_DIR/metrics.jsonl" "$RUN_DIR/train_config.json" "$DEST/"

# held-out numbers of the installed (float16) model and of the baselines, on the same bases:
# the original four-genome held-out set (the figures the first demo model was measured on) and the
# held-out end of every shipped sequence; FNS marginals and exact within-token conditionals
"$PYTHON" - <<'PY'
import json
import torch
from hexamer.carbon import Carbon
from hexamer.demo import demo_data_files, demo_model_path
from hexamer.demo.heldout import heldout_report
from hexamer.train.data import load_corpus, validation_windows
from hexamer.train.evaluate import evaluate_model, markov_accuracy

torch.set_num_threads(1)
carbon = Carbon.from_pretrained(demo_model_path())
files = demo_data_files()
original = [p for p in files if p.name in ("ecoli_mg1655.fa.gz", "human_chr20.fa.gz", "lambda_phage.fa.gz", "saureus_n315.fa.gz")]
report = {
    "original_held_out": heldout_report(carbon, original).to_dict(),
    "all_held_out": heldout_report(carbon, files).to_dict(),
}
corpus = load_corpus([str(p) for p in files], val_fraction=0.1)
report["markov6_aligned_all"] = markov_accuracy(corpus.train, validation_windows(corpus.val, 6000), order=6, aligned=True)
quick = validation_windows(load_corpus([str(p) for p in original], val_fraction=0.1).val, 6000, max_bp=20_000)
res = evaluate_model(carbon.model, carbon.tokenizer, quick, batch_size=4)
report["quick_check"] = {"bases": res.n_bases, "accuracy": round(res.accuracy, 4)}
print(json.dumps(report, indent=2))
PY
