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
    warnings.simplefilter("ignore")  # the converter's hash probe text holds long digit runs, not DNA
    sys.argv = [str(converter), folder_arg, *rest]
    runpy.run_path(str(converter), run_name="__main__")
    return 0
