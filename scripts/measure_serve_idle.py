"""Resident memory of an idle ``hexamer serve`` with its defaults, against the size of its weights.

    python scripts/measure_serve_idle.py --model ~/.cache/hexamer/bench-500m-qwen3-float32 \
        [--trees /work/main,.] [--request-bp 1080]

For each source tree (default: this one), starts ``hexamer serve --model MODEL`` with nothing else
(the defaults a deployment gets: the model's context, 64 sequences, the default KV pool), waits for
``/health``, then 5 s, and reads the server process's ``VmRSS``, ``RssAnon`` and ``RssFile`` from
``/proc/PID/status``; with ``--request-bp``, it then generates that many bases once and reads them
again 5 s later (idle after work). "weights" is the size of the folder's ``*.safetensors`` files.
Prints one JSON line per tree (bytes, and GB = 1e9 bytes).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
FIELDS = ("VmRSS", "RssAnon", "RssFile")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _status(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in FIELDS:
            out[name] = int(value.split()[0]) * 1024
    return out


def _wait_healthy(url: str, proc: subprocess.Popen) -> None:
    for _ in range(1200):
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with status {proc.returncode}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError("the server did not start")


def measure(tree: Path, model: str, request_bp: int | None) -> dict:
    port = _free_port()
    cmd = [sys.executable, "-m", "hexamer", "serve", "--model", model, "--port", str(port)]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.Popen(cmd, env=env, cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_healthy(url, proc)
        time.sleep(5)
        row: dict = {"tree": str(tree), "idle": _status(proc.pid)}
        if request_bp:
            body = {"prompt": "ACGT" * 270, "max_bp": request_bp, "mode": "token", "temperature": 0}
            httpx.post(f"{url}/v1/dna/generate", json=body, timeout=3600).raise_for_status()
            time.sleep(5)
            row["after_request"] = _status(proc.pid)
        return row
    finally:
        proc.terminate()
        proc.wait(timeout=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--trees", default=str(ROOT), help="Comma-separated source trees to run, in order.")
    parser.add_argument("--request-bp", type=int, default=None)
    args = parser.parse_args()
    weights = sum(f.stat().st_size for f in Path(args.model).expanduser().glob("*.safetensors"))
    for tree in args.trees.split(","):
        row = measure(Path(tree).resolve(), str(Path(args.model).expanduser()), args.request_bp)
        row["weights"] = weights
        for key in ("idle", "after_request"):
            if key in row:
                rss = row[key]["VmRSS"]
                row[key]["over_weights_GB"] = round((rss - weights) / 1e9, 3)
                row[key]["VmRSS_GB"] = round(rss / 1e9, 3)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
