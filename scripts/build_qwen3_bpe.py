"""Rebuild ``hexamer/synthetic/data/qwen3_bpe.json.xz``: the real Qwen3 base BPE of Carbon's tokenizer.

Hub downloads are not possible everywhere hexamer is tested, but llama.cpp ships the Qwen2 vocabulary
(the same 151,643 BPE tokens and merges that Qwen3 uses) as ``models/ggml-vocab-qwen2.gguf``; its
source tree is vendored in the ``llama-cpp-python`` sdist. This script reads that GGUF (with the
``gguf`` package), adds Qwen3's 26 added tokens and writes a ``tokenizer.json``, xz-compressed.

    pip download --no-deps --no-binary :all: llama-cpp-python==0.3.36
    tar xzf llama_cpp_python-0.3.36.tar.gz
    pip install gguf
    python scripts/build_qwen3_bpe.py llama_cpp_python-0.3.36/vendor/llama.cpp/models/ggml-vocab-qwen2.gguf
"""

from __future__ import annotations

import json
import lzma
import sys
from pathlib import Path

from hexamer.synthetic.qwen import QWEN3_BPE_SIZE, qwen_tokenizer_json

OUT = Path(__file__).resolve().parents[1] / "hexamer" / "synthetic" / "data" / "qwen3_bpe.json.xz"


def main(gguf_path: str) -> None:
    import gguf  # only needed to rebuild the fixture

    reader = gguf.GGUFReader(gguf_path)
    tokens = reader.fields["tokenizer.ggml.tokens"]
    merges = reader.fields["tokenizer.ggml.merges"]
    vocab = {tokens.contents(i): i for i in range(QWEN3_BPE_SIZE)}
    if len(vocab) != QWEN3_BPE_SIZE:
        raise SystemExit(f"expected {QWEN3_BPE_SIZE} distinct BPE tokens, got {len(vocab)}")
    merge_list = [merges.contents(i).split(" ") for i in range(len(merges.data))]
    data = qwen_tokenizer_json(vocab, merge_list, added_base=QWEN3_BPE_SIZE)
    raw = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_bytes(lzma.compress(raw, preset=9 | lzma.PRESET_EXTREME))
    print(
        f"wrote {OUT} ({OUT.stat().st_size / 1e6:.2f} MB, {len(vocab)} BPE tokens, {len(merge_list)} merges)"
    )


if __name__ == "__main__":
    main(sys.argv[1])
