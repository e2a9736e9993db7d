"""Resident memory of ``hexamer serve --model BASE --head HEAD`` with the head on the served
model's own decoder, against a head whose backbone differs (loaded in full).

    python scripts/measure_head_sharing.py [--model hexamer/data/demo-model] [--dtype float32]

Builds two head folders on BASE with the same random ``score``: a probe's layout (the backbone
files hard links to BASE's: served on BASE's decoder) and a copy whose final-norm weights are
moved by 1e-3 (a fine-tuned backbone: loaded in full). Starts ``hexamer serve`` on each, and on
BASE alone, waits for ``/health``, answers one ``/v1/dna/predict`` and reads the server process's
VmRSS from /proc. Prints one JSON line (MiB).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from safetensors.torch import load_file, save_file

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def _serve_rss(model: str, head: Path | None, dtype: str) -> float:
    port = _free_port()
    cmd = [sys.executable, "-m", "hexamer", "serve", "--model", model, "--port", str(port), "--dtype", dtype]
    cmd += ["--head", str(head)] if head is not None else []
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(600):
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        else:
            raise RuntimeError("the server did not start")
        if head is not None:
            r = httpx.post(f"{url}/v1/dna/predict", json={"sequences": ["ACGT" * 30]}, timeout=120)
            r.raise_for_status()
        time.sleep(1.0)
        return _rss_mib(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=str(ROOT / "hexamer" / "data" / "demo-model"))
    parser.add_argument("--dtype", default="float32")
    args = parser.parse_args()

    from hexamer.finetune.best_folder import save_linked_head
    from hexamer.finetune.folders import new_classifier, save_classifier, weight_files
    from hexamer.finetune.head import HeadSettings
    from hexamer.finetune.task import TaskSpec

    with tempfile.TemporaryDirectory(prefix="hexamer-head-rss-") as tmp:
        model = new_classifier(args.model, HeadSettings(TaskSpec("regression", ("y",))), seed=0)
        shared = save_linked_head(model, Path(tmp) / "probe", weight_files(args.model))
        full = save_classifier(model, Path(tmp) / "tuned")
        tensors = load_file(str(full / "model.safetensors"))
        tensors["model.norm.weight"] = tensors["model.norm.weight"] + 1e-3
        save_file(tensors, str(full / "model.safetensors"))
        result = {
            "model": args.model,
            "dtype": args.dtype,
            "rss_mib_lm_only": round(_serve_rss(args.model, None, args.dtype), 1),
            "rss_mib_head_shared": round(_serve_rss(args.model, shared, args.dtype), 1),
            "rss_mib_head_full": round(_serve_rss(args.model, full, args.dtype), 1),
        }
    result["saving_mib"] = round(result["rss_mib_head_full"] - result["rss_mib_head_shared"], 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
