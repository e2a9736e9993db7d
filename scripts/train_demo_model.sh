#!/usr/bin/env bash
# Rebuild the built-in demo model (hexamer/data/demo-model) from the DNA shipped in hexamer/data/dna.
#
#   scripts/train_demo_model.sh            # train (~19 CPU-minutes on one core), install, print the README numbers
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
mkdir -p "$RUN_DIR"
start=$(date +%s)

# Copy windows: 200 pieces of 6,000 bp of the TRAINING split (never the held-out ends), in each of
# which one stretch of 200-1,500 bp (0-2% substitutions, 1 in 4 reverse-complemented) is written again
# further on; one record, so any 6,000-bp window holds copies. About 16% of stage-2 windows come from
# it: real genomes repeat too rarely for a model this size to learn to copy from context in 1,000 steps.
"$PYTHON" - "$RUN_DIR/copies.fa" <<'PY'
import glob, sys
import numpy as np
from hexamer.train.data import load_corpus, reverse_complement

rng = np.random.default_rng(0)
train = load_corpus(sorted(glob.glob("hexamer/data/dna/*.fa.gz")), val_fraction=0.1).train
weights = np.array([len(s.bases) for s in train], dtype=float)
weights /= weights.sum()
pieces = []
for _ in range(200):
    seg = train[rng.choice(len(train), p=weights)].bases
    start = int(rng.integers(0, len(seg) - 6000))
    s = list(seg[start : start + 6000])
    n = int(rng.integers(200, 1501))
    p1 = int(rng.integers(0, 5400 - 2 * n - 1))
    p2 = int(rng.integers(p1 + n, 5400 - n))
    piece = "".join(s[p1 : p1 + n])
    if rng.random() < 0.25:
        piece = reverse_complement(piece)
    piece = list(piece)
    rate = rng.uniform(0, 0.02)
    for i in np.flatnonzero(rng.random(n) < rate):
        piece[i] = "ACGT"[("ACGT".index(piece[i]) + int(rng.integers(1, 4))) % 4]
    s[p2 : p2 + n] = piece
    pieces.append("".join(s))
with open(sys.argv[1], "w") as fh:
    fh.write(">copies 200 training-split pieces of 6,000 bp, each with one stretch written twice\n")
    fh.write("".join(pieces) + "\n")
PY

# Every stage: 6,000-bp windows (10% of each sequence held out, half reverse-complemented), batches
# of 4, a cosine schedule down to 10% of --lr, token CE then FNS (--fns-start), float16 checkpoints.
train_stage() {
    # shellcheck disable=SC2086  # HEXAMER may be a command with arguments
    $HEXAMER train "$@" \
        --window-bp 6000 --val-fraction 0.1 --rc-prob 0.5 --batch-size 4 --schedule cosine --min-lr-ratio 0.1 \
        --objective staged --log-every 10 --save-dtype float16 --threads "$THREADS" --device cpu -q
}
# stage 1: a new model, 300 steps of token CE (of a schedule spanning 1,800 steps)
train_stage hexamer/data/dna/*.fa.gz \
    --output-dir "$RUN_DIR/stage1" --init tiny \
    --hidden-size 256 --num-layers 4 --num-heads 4 --num-kv-heads 2 --intermediate-size 768 \
    --context-length 1024 --steps 1800 --stop-at 300 --lr 3e-3 --warmup-steps 50 --fns-start 0.85 \
    --eval-every 200 --val-max-bp 120000 --save-every 300 --keep-checkpoints 3 --seed 0
# stage 2: from that checkpoint, 100 steps of token CE (of a cosine schedule from 3e-3 spanning 700
# steps), with the copy windows added to the data
train_stage hexamer/data/dna/*.fa.gz "$RUN_DIR/copies.fa" \
    --output-dir "$RUN_DIR/stage2" --init "$RUN_DIR/stage1/checkpoint-0000300" \
    --steps 700 --stop-at 100 --lr 3e-3 --warmup-steps 20 --fns-start 0.85 \
    --eval-every 0 --val-max-bp 60000 --save-every 100 --keep-checkpoints 2 --seed 1
# stage 3: from that checkpoint, 300 steps: cosine from 2e-3 to 2e-4, token CE for 240 steps, FNS for
# the last 60
train_stage hexamer/data/dna/*.fa.gz "$RUN_DIR/copies.fa" \
    --output-dir "$RUN_DIR/stage3" --init "$RUN_DIR/stage2/checkpoint-0000100" \
    --steps 300 --lr 2e-3 --warmup-steps 10 --fns-start 0.8 \
    --eval-every 0 --val-max-bp 60000 --save-every 100 --keep-checkpoints 3 --seed 2
echo "training wall time: $(( $(date +%s) - start )) s"

# install the final folder (model + tokenizer; the README is written by hand from the numbers below)
for f in config.json generation_config.json model.safetensors tokenizer.json tokenizer_config.json \
         dna_config.json special_tokens_map.json added_tokens.json; do
    cp "$RUN_DIR/stage3/final/$f" "$DEST/$f"
done
for stage in 1 2 3; do  # training curves and options of every stage
    cp "$RUN_DIR/stage$stage/metrics.jsonl" "$DEST/metrics-stage$stage.jsonl"
    cp "$RUN_DIR/stage$stage/train_config.json" "$DEST/train_config-stage$stage.json"
done

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
