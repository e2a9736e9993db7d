"""Synthetic models and data made on the spot, with no download: Carbon-format model folders with
random weights in any shape (:mod:`~hexamer.synthetic.folders`), the Qwen3 vocabulary facts they
share with Carbon (:mod:`~hexamer.synthetic.qwen`) and random VCFs (:mod:`~hexamer.synthetic.vcf`).

Product code (training's model init, the built-in tiny model, the demo, benchmarks) builds on them;
tests do too, with the test-only helpers of :mod:`hexamer.testing` on top.
"""

from hexamer.synthetic.folders import (
    SHAPES,
    ModelShape,
    build_carbon_folder,
    build_carbon_folder_once,
    llama_config,
    qwen3_bpe_json,
    random_llama_weights,
    save_safetensors,
    tiny_bpe_json,
    write_tokenizer_files,
)
from hexamer.synthetic.qwen import CARBON_DNA_START_ID, QWEN3_ADDED_TOKENS, QWEN3_BPE_SIZE

__all__ = [
    "CARBON_DNA_START_ID",
    "QWEN3_ADDED_TOKENS",
    "QWEN3_BPE_SIZE",
    "SHAPES",
    "ModelShape",
    "build_carbon_folder",
    "build_carbon_folder_once",
    "llama_config",
    "qwen3_bpe_json",
    "random_llama_weights",
    "save_safetensors",
    "tiny_bpe_json",
    "write_tokenizer_files",
]
