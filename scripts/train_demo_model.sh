#!/usr/bin/env bash
# Rebuild the built-in demo model (hexamer/data/demo-model) from the DNA shipped in hexamer/data/dna.
#
#   scripts/train_demo_model.sh            # train (~10 min on 2 CPU cores), install, print the README numbers
#
# Environment: HEXAMER (command, default `hexamer`), PYTHON (default .venv/bin/python or python3),
# RUN_DIR (training folder, default /tmp/hexamer-demo-run), THREADS (torch CPU threads, default 1:
# this tiny model trains as fast on one thread, and two threads collapse when the machine is busy).
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
    --hidden-size 128 --num-layers 2 --num-heads 4 --num-kv-heads 2 --intermediate-size 384 \
    --context-length 1024 --window-bp 6000 --val-fraction 0.1 --rc-prob 0.5 \
    --steps 500 --batch-size 4 --lr 5e-3 --warmup-steps 10 --schedule cosine --min-lr-ratio 0.1 \
    --objective staged --fns-start 0.85 \
    --eval-every 125 --save-every 250 --save-dtype float16 --seed 0 --threads "$THREADS" --device cpu
echo "training wall time: $(( $(date +%s) - start )) s"

# install the final folder (model + tokenizer; the README is written by hand from the numbers below)
for f in config.json generation_config.json model.safetensors tokenizer.json tokenizer_config.json \
         dna_config.json special_tokens_map.json added_tokens.json; do
    cp "$RUN_DIR/final/$f" "$DEST/$f"
done
cp "$RUN_DIR/metrics.jsonl" "$RUN_DIR/train_config.json" "$DEST/"

# held-out numbers of the installed (float16) model and of the baselines, on the same bases
"$PYTHON" - <<'PY'
import glob, json
import torch
from hexamer.train.data import load_corpus, validation_windows
from hexamer.train.evaluate import composition_accuracy, evaluate_folder, markov_accuracy

torch.set_num_threads(1)
files = sorted(glob.glob("hexamer/data/dna/*.fa.gz"))
full = evaluate_folder("hexamer/data/demo-model", files, val_fraction=0.1, window_bp=6000)
quick = evaluate_folder("hexamer/data/demo-model", files, val_fraction=0.1, window_bp=6000, max_bp=20_000)
corpus = load_corpus(files, val_fraction=0.1)
windows = validation_windows(corpus.val, 6000)
report = {
    "held_out_bases": full.n_bases,
    "accuracy": round(full.accuracy, 4),
    "accuracy_by_position": [round(a, 4) for a in full.accuracy_by_position],
    "bp_loss": round(full.bp_loss, 4),
    "quick_check_bases": quick.n_bases,
    "quick_check_accuracy": round(quick.accuracy, 4),
    "composition_baseline": round(composition_accuracy(corpus.train, windows), 4),
    "markov_aligned": {o: round(markov_accuracy(corpus.train, windows, order=o, aligned=True), 4) for o in (1, 2, 3, 4, 5, 6, 8)},
    "markov_next_base": {o: round(markov_accuracy(corpus.train, windows, order=o, aligned=False), 4) for o in (1, 2, 3, 4, 5, 6, 8)},
}
print(json.dumps(report, indent=2))
PY
