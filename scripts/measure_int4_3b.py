"""int4 batch-1 decode against llama.cpp's Q4_K_M and Q4_0 at the 3B shape, on about 16 GB of disk.

``hexamer bench quant --shape 3b --gguf-quantize q4_k_m,q4_0`` builds a float32 folder (12.4 GB)
and llama.cpp's float32 GGUF of it (12.4 GB) before quantizing: about 28 GB. This builds the random
3B folder in bfloat16 (``~/.cache/hexamer/bench-3b-qwen3-bfloat16``, 6.2 GB), converts it to a
bfloat16 GGUF (6.2 GB, deleted once quantized unless ``--keep-bf16-gguf``) that llama.cpp quantizes
to Q4_K_M and Q4_0 (about 1.9 GB each, kept beside the folder), then times hexamer's int4
(quantized from the bf16 folder while loading; embedding and head float32) against both, the same
threads, alternating rounds, best round kept (``hexamer.bench.quant.run_quant_speed``: the rows of
``hexamer bench quant``, without the float32 row: its "× float32" columns read nan). Needs llama-cpp-python and its converter::

    PYTHONPATH=$PWD:/work/llamacpp-build/site \\
    HEXAMER_LLAMA_CPP_DIR=/work/llamacpp-build/llama_cpp_python-0.3.36 \\
    python scripts/measure_int4_3b.py --threads 2 --rounds 3 --prompt-bp 300 --new-bp 120
"""

from __future__ import annotations

import argparse
import json

import torch

from hexamer.bench.common import bench_model_folder
from hexamer.bench.llamacpp.convert import convert_to_gguf, default_gguf_path
from hexamer.bench.llamacpp.quantize import quantize_gguf
from hexamer.bench.quant import load_variants, run_quant_speed
from hexamer.bench.report import print_report
from hexamer.cache import cache_root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", default="3b", help="random-weight shape (tiny: a quick trial run)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--prompt-bp", type=int, default=300)
    parser.add_argument("--new-bp", type=int, default=120)
    parser.add_argument("--keep-bf16-gguf", action="store_true")
    parser.add_argument("--out", help="also write the table as JSON here")
    args = parser.parse_args()
    if args.threads < 1 or args.rounds < 1 or args.prompt_bp < 6 or args.new_bp < 12:
        parser.error("--threads and --rounds must be >= 1, --prompt-bp >= 6, --new-bp >= 12")
    torch.set_num_threads(args.threads)
    folder = bench_model_folder(args.shape, cache_root(), dtype="bfloat16")
    ggufs, bf16 = {}, None
    for qtype in ("q4_k_m", "q4_0"):
        out = default_gguf_path(folder, qtype)
        if not out.is_file():
            bf16 = bf16 or convert_to_gguf(folder, outtype="bf16", log=print)
            quantize_gguf(bf16, out, qtype, log=print)
        ggufs[qtype] = out
    if bf16 is not None and not args.keep_bf16_gguf:
        bf16.unlink()
    carbons = load_variants(folder, ["int4"], 1, print)
    report = run_quant_speed(
        carbons, batch_sizes=(1,), prompt_bp=args.prompt_bp, new_bp=args.new_bp, rounds=args.rounds,
        ggufs=ggufs, folder=folder, log=print,
    )  # fmt: skip
    print_report(report)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report.as_dict(), f, indent=2)


if __name__ == "__main__":
    main()
