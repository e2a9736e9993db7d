"""Cost of enforcing design constraints while decoding, at batch 16, in one run.

Three ways to decode the same number of bases, after an untimed warm-up of each, ``--repeats``
rounds in alternating order (round r starts with way r mod 3 and goes forward on even rounds,
backward on odd ones, so no way always runs first or right after the same other way): the
engine's unconstrained bp-level generation (``Carbon.generate``, FNS sampling), the design decoder
with no constraint, and the design decoder under a typical cloning rule set. Prints one JSON line
with the median seconds of each, every round, the per-round ratios and the ratios of medians, and
the median CPU seconds of this process per way (less disturbed by other jobs than wall time, but
counting every torch thread, spin-waits included).

    python scripts/measure_design_speed.py --shape tiny --length 300
    python scripts/measure_design_speed.py --shape 500m --length 120 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="tiny")
    ap.add_argument("--model", default=None, help="an existing folder instead of building --shape")
    ap.add_argument("--length", type=int, default=300)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--device", default=None)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()

    import torch

    from hexamer.carbon import Carbon
    from hexamer.design import DesignConstraints, compile_constraints
    from hexamer.design.decode import sample_batch
    from hexamer.machine import machine_info
    from hexamer.synthetic import build_carbon_folder

    if args.threads:
        torch.set_num_threads(args.threads)
    folder = args.model or build_carbon_folder(Path(tempfile.mkdtemp()) / "model", shape=args.shape)
    carbon = Carbon.from_pretrained(folder, device=args.device)
    n, b = args.length, args.batch
    free = compile_constraints(DesignConstraints(n))
    rules = compile_constraints(
        DesignConstraints(
            n,
            gc=(0.35, 0.65),
            gc_window=50,
            avoid_sites=("BsaI", "BsmBI", "BbsI", "SapI", "EcoRI", "BamHI", "XhoI", "NotI"),
            max_homopolymer=5,
        )
    )
    rngs = lambda s: [np.random.default_rng(s + i) for i in range(b)]  # noqa: E731
    ways = {
        "engine_bp": lambda s: carbon.generate(["<dna>"] * b, max_bp=n, seed=s, mode="bp"),
        "design_free": lambda s: sample_batch(carbon.backend, free, rngs(s)),
        "design_rules": lambda s: sample_batch(carbon.backend, rules, rngs(s)),
    }
    for way in ways.values():  # warm-up
        way(0)
    times: dict[str, list[float]] = {k: [] for k in ways}
    cpu: dict[str, list[float]] = {k: [] for k in ways}
    names = list(ways)
    for r in range(args.repeats):
        order = names[r % 3 :] + names[: r % 3]
        for name in order if r % 2 == 0 else order[::-1]:
            if carbon.backend.device.type == "cuda":
                torch.cuda.synchronize()
            t, c = time.perf_counter(), time.process_time()
            ways[name](r + 1)
            if carbon.backend.device.type == "cuda":
                torch.cuda.synchronize()
            times[name].append(time.perf_counter() - t)
            cpu[name].append(time.process_time() - c)
    med = {k: statistics.median(v) for k, v in times.items()}
    per_round = [round(a / b, 3) for a, b in zip(times["design_rules"], times["engine_bp"], strict=True)]
    print(
        json.dumps(
            {
                "shape": args.shape,
                "length": n,
                "batch": b,
                "repeats": args.repeats,
                "seconds": {k: round(v, 4) for k, v in med.items()},
                "rounds": {k: [round(x, 3) for x in v] for k, v in times.items()},
                "cpu_seconds": {k: round(statistics.median(v), 4) for k, v in cpu.items()},
                "rules_over_engine": round(med["design_rules"] / med["engine_bp"], 3),
                "rules_over_engine_per_round": per_round,
                "free_over_engine": round(med["design_free"] / med["engine_bp"], 3),
                "rules_over_free": round(med["design_rules"] / med["design_free"], 3),
                "machine": machine_info(),
            },
            default=str,
        )
    )


if __name__ == "__main__":
    main()
