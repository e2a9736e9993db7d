"""The converter's tokenizer shim: llama.cpp's converter reads Carbon's vocabulary from hexamer's
:class:`~hexamer.tokenizer.CarbonTokenizer` instead of importing the folder's ``tokenizer.py``.

:func:`_convert_main` is the ``python -m hexamer.bench.llamacpp _convert`` entry that
:func:`~hexamer.bench.llamacpp.convert.converter_command` runs in a subprocess.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hexamer.tokenizer.folder import read_json

#: The pre-tokenizer of Carbon's Qwen3 BPE, which llama.cpp implements as ``qwen2``.
_QWEN2_PRE_TOKENIZER = {
    "type": "Sequence",
    "pretokenizers": [
        {
            "type": "Split",
            "pattern": {
                "Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
                "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
            },
            "behavior": "Isolated",
            "invert": False,
        },
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
    ],
}


class _ConverterTokenizer:
    """What ``_set_vocab_hybriddna`` reads from the folder's tokenizer, built from hexamer's
    :class:`CarbonTokenizer` (data files only) instead of importing the folder's ``tokenizer.py``."""

    def __init__(self, folder: Path) -> None:
        from hexamer.tokenizer import CarbonTokenizer

        tok = CarbonTokenizer.from_pretrained(folder)
        layout = tok.layout
        self._tok = tok
        self.vocab = tok.get_vocab()
        self.kmers = list(layout.kmers)
        self.dna_token_to_id = {kmer: layout.kmer_start + i for i, kmer in enumerate(layout.kmers)}
        data = read_json(folder / "tokenizer.json", folder) or {}
        #: the converter names the pre-tokenizer by hashing an encoding of its probe text, which
        #: only matches for the full Qwen3 vocabulary; a smaller BPE with the same pre-tokenizer
        #: (the demo model's) is recognised here from tokenizer.json instead
        self.qwen2_pre_tokenizer = data.get("pre_tokenizer") == _QWEN2_PRE_TOKENIZER
        added = {t["content"]: (t["id"], bool(t.get("special"))) for t in data.get("added_tokens", [])}
        for offset, name in enumerate(layout.special_tokens):  # <dna>, </dna>, <oov>: added_tokens.json
            added.setdefault(name, (layout.dna_start_id + offset, True))
        self._added = added
        self.added_tokens_decoder = {i: _Added(name, special) for name, (i, special) in added.items()}

    def get_added_vocab(self) -> dict[str, int]:
        return {name: i for name, (i, _) in self._added.items()}

    def encode(self, text: str, **_: Any) -> list[int]:
        return self._tok.encode(text)


@dataclass
class _Added:
    content: str
    special: bool


def _convert_main(argv: list[str]) -> int:
    """``python -m hexamer.bench.llamacpp _convert CONVERTER FOLDER [converter args]``.

    Runs the vendored converter unchanged; only ``AutoTokenizer.from_pretrained`` is redirected for
    folders whose ``tokenizer_config.json`` names ``HybridDNATokenizer`` (hexamer never executes a
    model folder's code, and our test folders' ``tokenizer.py`` refuses to be imported).
    """
    import runpy
    import warnings

    import transformers

    converter, folder_arg, rest = Path(argv[0]), argv[1], argv[2:]
    root = converter.parent
    sys.path[:0] = [str(root / "gguf-py"), str(root)]
    original = transformers.AutoTokenizer.from_pretrained

    def from_pretrained(path: Any, *args: Any, **kwargs: Any) -> Any:
        config = read_json(Path(path) / "tokenizer_config.json") if Path(path).is_dir() else None
        if config is not None and config.get("tokenizer_class") == "HybridDNATokenizer":
            return _ConverterTokenizer(Path(path))
        return original(path, *args, **kwargs)

    transformers.AutoTokenizer.from_pretrained = from_pretrained  # type: ignore[method-assign]
    _name_small_qwen2_vocabularies()
    warnings.simplefilter("ignore")  # the converter's hash probe text holds long digit runs, not DNA
    sys.argv = [str(converter), folder_arg, *rest]
    runpy.run_path(str(converter), run_name="__main__")
    return 0


def _name_small_qwen2_vocabularies() -> None:
    """Let the converter's pre-tokenizer detection fall back to ``qwen2`` for a hexamer-read
    tokenizer whose tokenizer.json holds exactly Qwen2's pre-tokenizer (its hash probe only knows
    full vocabularies). Converters without the ``conversion`` package are left as they are."""
    try:
        from conversion.base import TextModel  # type: ignore[import-not-found]
    except ImportError:
        return
    detect = TextModel.get_vocab_base_pre

    def get_vocab_base_pre(self: Any, tokenizer: Any) -> str:
        try:
            return detect(self, tokenizer)
        except NotImplementedError:
            if isinstance(tokenizer, _ConverterTokenizer) and tokenizer.qwen2_pre_tokenizer:
                return "qwen2"
            raise

    TextModel.get_vocab_base_pre = get_vocab_base_pre
