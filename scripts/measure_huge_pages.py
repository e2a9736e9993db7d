"""A/B of huge-page-backed int4 weights: one process, two loads of one folder (HEXAMER_HUGE_PAGES=0
and 1), 12 alternating rounds; per round, the time of 40 extra greedy decode steps.

    python scripts/measure_huge_pages.py [FOLDER]   # default: the cached 500M bench folder
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import torch

from hexamer.carbon import Carbon


def _step_ms(model: Carbon, prompt: str) -> float:
    """Milliseconds per decode step, from the difference of a 60-bp and a 300-bp generation."""
    t0 = time.perf_counter()
    model.generate(prompt, max_bp=60, mode="token", temperature=0)
    t1 = time.perf_counter()
    model.generate(prompt, max_bp=300, mode="token", temperature=0)
    t2 = time.perf_counter()
    return ((t2 - t1) - (t1 - t0)) / 40 * 1000


def main() -> None:
    torch.set_num_threads(2)
    path = (
        sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser("~/.cache/hexamer/bench-500m-qwen3-float32")
    )
    models = {}
    for hp in ("0", "1"):
        os.environ["HEXAMER_HUGE_PAGES"] = hp
        models[hp] = Carbon.from_pretrained(path, dtype="int4")
    rollup = Path("/proc/self/smaps_rollup").read_text().splitlines()
    print([line for line in rollup if "AnonHuge" in line])
    prompt = "ACGT" * 75
    times: dict[str, list[float]] = {"0": [], "1": []}
    for r in range(12):
        for hp in ("0", "1") if r % 2 == 0 else ("1", "0"):
            times[hp].append(_step_ms(models[hp], prompt))
    for hp in ("0", "1"):
        print(
            f"HEXAMER_HUGE_PAGES={hp}: median {statistics.median(times[hp]):.2f} ms, min {min(times[hp]):.2f}"
        )
    print(f"off / on, medians: {statistics.median(times['0']) / statistics.median(times['1']):.3f}")
    print("per round:", sorted(round(a / b, 3) for a, b in zip(times["0"], times["1"], strict=True)))


if __name__ == "__main__":
    main()
