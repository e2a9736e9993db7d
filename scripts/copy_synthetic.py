"""Does a small Llama learn to copy (induction) on the plainest token task? A pipeline check for
the demo model's copy training.

Each row is ``<dna>`` + 3K random 6-mer tokens in which a stretch X of K/2..K tokens is written
again after a random gap (``--fixed``: K tokens then the same K again, a fixed offset that a
positional head solves without an induction head). An induction head drives the loss on the copy
from ln(V) to ~0. Two model builds on the same data and loop:

* ``--model hf``: ``transformers.LlamaForCausalLM`` with its own init;
* ``--model hexamer``: the model ``hexamer train`` builds (``hexamer.train.init.starting_point``,
  ``LlamaModel``, its init incl. the compositional k-mer rows unless ``--kmer-init random``), or
  ``--init FOLDER`` to start from a trained folder (e.g. the shipped demo model).

``--letters 2`` draws the 6-mers from a 2-letter alphabet (64 tokens), ``--letters 4`` from all
4,096; ``--curriculum N`` trains N steps on 2 letters first. ``--loss all`` supervises every
position (what ``hexamer train`` does), ``--loss second`` only the copy. One torch thread.

    python scripts/copy_synthetic.py --model hexamer --steps 1500 --k 32 --batch 32 --lr 1e-3

Prints one JSON line per ``--log-every`` steps: second-half loss (nats/token), its accuracy.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import torch
import torch.nn.functional as F
from safetensors.torch import save_model

from hexamer.train.init import starting_point


def build(args: argparse.Namespace) -> tuple[torch.nn.Module, int, int, bool]:
    """(model, kmer_start, dna_start_id, is_hf)."""
    shape = {
        "hidden_size": args.hidden,
        "num_layers": args.layers,
        "num_heads": args.heads,
        "num_kv_heads": args.kv_heads,
        "intermediate_size": args.hidden * 4,
        "context_length": 1024,
        "rope_theta": args.rope_theta,
        "tie_embeddings": not args.untied,
    }
    start = starting_point(
        args.init, seed=args.seed, overrides=shape if args.init == "tiny" else None, kmer_init=args.kmer_init
    )
    layout = start.tokenizer.layout
    if args.model == "hexamer":
        return start.model, layout.kmer_start, layout.dna_start_id, False
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = dict(start.hf_config)
    cfg.pop("torch_dtype", None)
    torch.manual_seed(args.seed)
    model = LlamaForCausalLM(LlamaConfig(**cfg))
    return model, layout.kmer_start, layout.dna_start_id, True


def batch(
    gen: torch.Generator, args: argparse.Namespace, letters: int, kmer_start: int, dna: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of ``<dna>`` + random tokens; with ``--fixed``, X X (X of K tokens: a fixed offset, which
    a positional head solves without matching content); otherwise X (K/2..K tokens) at a random place
    and again after a gap of 0..K tokens, so only content matching finds the copy. Returns the ids
    and a mask of the copy's tokens that an induction head predicts (all but its first)."""
    k, b = args.k, args.batch
    length = 2 * k if args.fixed else 3 * k
    digits = torch.randint(0, letters, (b, length, 6), generator=gen)
    ids = (digits * (4 ** torch.arange(5, -1, -1))).sum(-1) + kmer_start
    mask = torch.zeros(b, length, dtype=torch.bool)
    for r in range(b):
        n = k if args.fixed else int(torch.randint(k // 2, k + 1, (1,), generator=gen))
        gap = 0 if args.fixed else int(torch.randint(0, length - 2 * n + 1, (1,), generator=gen))
        first = 0 if args.fixed else int(torch.randint(0, length - 2 * n - gap + 1, (1,), generator=gen))
        second = first + n + gap
        ids[r, second : second + n] = ids[r, first : first + n]
        mask[r, second + 1 : second + n] = True
    head = torch.full((b, 1), dna)
    return torch.cat([head, ids], dim=1), torch.cat([torch.zeros(b, 1, dtype=torch.bool), mask], dim=1)


def logits_of(model: torch.nn.Module, ids: torch.Tensor, is_hf: bool) -> torch.Tensor:
    if is_hf:
        return model(input_ids=ids).logits.float()
    return model(ids, logits_at="all", fp32_logits=True).logits


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=("hf", "hexamer"), default="hexamer")
    ap.add_argument("--init", default="tiny")
    ap.add_argument("--kmer-init", choices=("compositional", "random"), default="compositional")
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--rope-theta", type=float, default=500000.0)
    ap.add_argument("--untied", action="store_true")
    ap.add_argument("--k", type=int, default=32)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--wd", type=float, default=0.0)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--fixed", action="store_true", help="X X at a fixed offset (positional shortcut)")
    ap.add_argument("--letters", type=int, default=4)
    ap.add_argument("--curriculum", type=int, default=0)
    ap.add_argument("--loss", choices=("all", "second"), default="all")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument(
        "--save", default="", help="write the model's weights (safetensors) here at every log line"
    )
    args = ap.parse_args()
    torch.set_num_threads(1)
    model, kmer_start, dna, is_hf = build(args)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=args.wd)
    gen = torch.Generator().manual_seed(args.seed + 100)
    t0 = time.perf_counter()
    for step in range(args.steps):
        letters = 2 if step < args.curriculum else args.letters
        for g in opt.param_groups:
            g["lr"] = args.lr * min(1.0, (step + 1) / args.warmup)
        ids, mask = batch(gen, args, letters, kmer_start, dna)
        logits = logits_of(model, ids[:, :-1], is_hf)
        labels = ids[:, 1:].clone()
        target = mask[:, 1:]
        if args.loss == "second":
            labels[~target] = -100
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if args.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        opt.step()
        if (step + 1) % args.log_every == 0 or step == 0:
            with torch.no_grad():
                second = logits[target]
                tgt = ids[:, 1:][target]
                l2 = float(F.cross_entropy(second, tgt))
                acc = float((second.argmax(-1) == tgt).float().mean())
            row = {"step": step + 1, "letters": letters, "second_loss": round(l2, 3),
                   "uniform": round(math.log(4**6 if letters == 4 else 64), 3), "second_acc": round(acc, 3),
                   "s": round(time.perf_counter() - t0)}  # fmt: skip
            print(json.dumps(row), flush=True)
            if args.save:  # at every log line, so a run cut short by a time limit keeps its model
                save_model(model, args.save)


if __name__ == "__main__":
    main()
