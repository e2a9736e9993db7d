"""Prefill time of prompts sharing a long prefix, with and without prefix caching (same outputs).

64 prompts (by default) of one random 6,000-bp prefix and their own random 60-bp tails, one
greedy 6-mer each, so the prefill is the work; the same model, the same KV pool for both runs
(``--kv-gib``), one engine per run, alternating ``--rounds`` times (cache off first).

    python scripts/measure_prefix_cache.py --model ~/.cache/hexamer/bench-500m-qwen3-float32 --threads 2
"""

from __future__ import annotations

import argparse
import json
import random
import time

import torch

from hexamer import Carbon
from hexamer.engine import Engine, EngineConfig, SamplingParams


def prompts(n: int, prefix_bp: int, tail_bp: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    prefix = "".join(rng.choice("ACGT") for _ in range(prefix_bp))
    return [prefix + "".join(rng.choice("ACGT") for _ in range(tail_bp)) for _ in range(n)]


def run(
    carbon: Carbon, texts: list[str], caching: bool, kv_bytes: int
) -> tuple[float, list[str], tuple[int, int]]:
    config = EngineConfig(max_batch_size=len(texts), prefix_caching=caching, kv_cache_bytes=kv_bytes)
    engine = Engine(carbon.model, carbon.layout, config)
    reqs = [
        engine.make_request(carbon.parse_prompt(t, i).ids, SamplingParams(max_bp=6, temperature=0.0))
        for i, t in enumerate(texts)
    ]
    start = time.perf_counter()
    engine.run(reqs)
    seconds = time.perf_counter() - start
    return seconds, [r.bases() for r in reqs], engine.prefix_cache_blocks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--prefix-bp", type=int, default=6000)
    ap.add_argument("--tail-bp", type=int, default=60)
    ap.add_argument("--kv-gib", type=float, default=4.0)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    carbon = Carbon.from_pretrained(a.model, device="cpu")
    texts = prompts(a.prompts, a.prefix_bp, a.tail_bp, a.seed)
    kv_bytes = int(a.kv_gib * 2**30)
    run(carbon, texts[:2], True, kv_bytes)  # warm-up
    rows = []
    for r in range(a.rounds):
        got = {}
        for caching in (False, True):
            seconds, out, (queried, hits) = run(carbon, texts, caching, kv_bytes)
            got[caching] = out
            rows.append(
                {
                    "round": r + 1,
                    "prefix_caching": caching,
                    "seconds": round(seconds, 2),
                    "blocks_queried": queried,
                    "blocks_found": hits,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
        rows[-1]["same_outputs"] = got[True] == got[False]
    off = [x["seconds"] for x in rows if not x["prefix_caching"]]
    on = [x["seconds"] for x in rows if x["prefix_caching"]]
    print(
        json.dumps(
            {
                "speedup_per_round": [round(f / n, 2) for f, n in zip(off, on, strict=True)],
                "same_outputs": all(x.get("same_outputs", True) for x in rows),
            }
        )
    )


if __name__ == "__main__":
    main()
