#!/usr/bin/env bash
# Rebuild the built-in demo model (hexamer/data/demo-model) from the DNA shipped in hexamer/data/dna.
#
#   scripts/train_demo_model.sh            # train (about 50 minutes of one core), install, print the card's numbers
#
# Environment: HEXAMER (command, default `hexamer`), PYTHON (default .venv/bin/python or python3),
# RUN_DIR (training folder, default /tmp/hexamer-demo-run), THREADS (torch CPU threads, default 1:
# a small model trains about as fast on one thread, and two threads collapse when the machine is busy),
# PAIRS_BP (bases of copy pairs in the mix, default 2000000), DEST (where the model is installed,
# default hexamer/data/demo-model).
set -euo pipefail
cd "$(dirname "$0")/.."

HEXAMER=${HEXAMER:-hexamer}
PYTHON=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
RUN_DIR=${RUN_DIR:-/tmp/hexamer-demo-run}
THREADS=${THREADS:-1}
PAIRS_BP=${PAIRS_BP:-2000000}
DEST=${DEST:-hexamer/data/demo-model}

rm -rf "$RUN_DIR"
mkdir -p "$RUN_DIR"
start=$(date +%s)

# Copy pairs: X + gap + X, X of 60-600 bp and the gap of 0-600 bp (multiples of 6, so the second X
# tokenizes as the same 6-mers), each half random DNA and half real DNA from the TRAINING split
# (never the held-out ends); concatenated to PAIRS_BP bases, deterministic (seed 0).
"$PYTHON" scripts/demo_copy_data.py --pairs "$RUN_DIR/pairs.fa" "$PAIRS_BP" 600

# One run: a new model whose layers 0-1 hold a copy circuit (--copy-circuit: previous-token heads
# and an induction head, kept fixed while the rest trains; docs/training.md), untied LM head,
# random k-mer rows elsewhere;
# 6,000-bp windows of the nine DNA slices and the copy pairs (any frame, half reverse-complemented),
# 10% of every sequence held out, batch 4, AdamW without weight decay, warm-up 100 steps to 3e-3 then
# cosine to 3e-4; token CE for the first 80% of the steps, FNS for the rest; float16 checkpoints.
# shellcheck disable=SC2086  # HEXAMER may be a command with arguments
$HEXAMER train hexamer/data/dna/*.fa.gz "$RUN_DIR/pairs.fa" \
    --output-dir "$RUN_DIR/run" --init tiny --copy-circuit --no-tie-embeddings --kmer-init random \
    --hidden-size 256 --num-layers 4 --num-heads 4 --num-kv-heads 2 --intermediate-size 768 \
    --context-length 1024 --window-bp 6000 --val-fraction 0.1 --rc-prob 0.5 --batch-size 4 \
    --steps 1200 --lr 3e-3 --warmup-steps 100 --schedule cosine --min-lr-ratio 0.1 --weight-decay 0 \
    --objective staged --fns-start 0.8 --eval-every 0 --val-max-bp 60000 \
    --save-every 200 --keep-checkpoints 2 --save-dtype float16 --log-every 10 --seed 0 \
    --threads "$THREADS" --device cpu -q
echo "training wall time: $(( $(date +%s) - start )) s"

# install the final folder (model + tokenizer; the README is written by hand from the numbers below),
# the training curve and every option of the run. Each file is copied beside its target and renamed
# over it: a new file, never a rewrite of the old one's bytes, which fine-tuned head folders may
# hold as hard links to their frozen backbone.
mkdir -p "$DEST"
install_file() {  # install_file SOURCE: into $DEST under the same name
    cp "$1" "$DEST/.$(basename "$1").tmp"
    mv -f "$DEST/.$(basename "$1").tmp" "$DEST/$(basename "$1")"
}
for f in config.json generation_config.json model.safetensors tokenizer.json tokenizer_config.json \
         dna_config.json special_tokens_map.json added_tokens.json; do
    install_file "$RUN_DIR/run/final/$f"
done
install_file "$RUN_DIR/run/metrics.jsonl"
install_file "$RUN_DIR/run/train_config.json"

# every figure of the model card, on held-out data (JSON)
"$PYTHON" scripts/eval_demo_model.py "$DEST"
