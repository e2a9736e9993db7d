"""A ``transformers`` tokenizer object backed by :class:`CarbonTokenizer` (no remote code).

``AutoTokenizer`` on a Carbon folder needs ``trust_remote_code=True`` because the folder names its
own Python class. This adapter gives ``transformers`` pipelines, ``generate`` and trainers a regular
``PreTrainedTokenizer`` that produces the very same ids, built from the folder's data files only.

    >>> from hexamer.tokenizer.hf import HexamerHFTokenizer       # doctest: +SKIP
    >>> tok = HexamerHFTokenizer.from_pretrained("path/to/Carbon-3B")
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

try:
    from transformers import PreTrainedTokenizer
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("hexamer.tokenizer.hf needs transformers: pip install 'hexamer[hf]'") from exc

from hexamer.tokenizer.hybrid import CarbonTokenizer


class HexamerHFTokenizer(PreTrainedTokenizer):
    """``transformers.PreTrainedTokenizer`` view of a :class:`CarbonTokenizer`.

    Ids, ``decode`` and right padding equal the official ``HybridDNATokenizer``; in addition the
    standard ``padding_side``/``truncation`` arguments are honoured. No BOS/EOS is ever added.
    """

    vocab_files_names: dict[str, str] = {}  # noqa: RUF012 - transformers reads this class attribute
    model_input_names = ["input_ids", "attention_mask"]  # noqa: RUF012

    def __init__(self, hexamer_tokenizer: CarbonTokenizer, **kwargs: Any) -> None:
        self.hexamer = hexamer_tokenizer  # set first: the base __init__ calls get_vocab()
        tok = hexamer_tokenizer
        kwargs.setdefault(
            "eos_token", tok.id_to_token(tok.eos_token_id) if tok.eos_token_id is not None else None
        )
        kwargs.setdefault(
            "pad_token", tok.id_to_token(tok.pad_token_id) if tok.pad_token_id is not None else None
        )
        kwargs.setdefault("padding_side", "right")
        kwargs.setdefault("clean_up_tokenization_spaces", False)
        if tok.model_max_length is not None:
            kwargs.setdefault("model_max_length", tok.model_max_length)
        super().__init__(**kwargs)
        if tok.name_or_path:
            self.name_or_path = tok.name_or_path

    @classmethod
    def from_pretrained(
        cls, name_or_path: str | os.PathLike[str], *args: Any, **kwargs: Any
    ) -> HexamerHFTokenizer:
        """Build from a Carbon-format folder or hub id; ``trust_remote_code`` is never needed."""
        kwargs.pop("trust_remote_code", None)
        revision = kwargs.pop("revision", None)
        auto_dna_tags = kwargs.pop("auto_dna_tags", None)
        return cls(
            CarbonTokenizer.from_pretrained(name_or_path, revision=revision, auto_dna_tags=auto_dna_tags),
            **kwargs,
        )

    # ---- vocabulary
    @property
    def vocab_size(self) -> int:
        return self.hexamer.vocab_size

    def __len__(self) -> int:
        return self.hexamer.vocab_size

    def get_vocab(self) -> dict[str, int]:
        return self.hexamer.get_vocab()

    def _convert_token_to_id(self, token: str) -> int:
        found = self.hexamer.token_to_id(token)
        if found is None:
            raise KeyError(f"unknown token {token!r}")
        return found

    def _convert_id_to_token(self, index: int) -> str:
        return self.hexamer.id_to_token(index)

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        ids = [self._convert_token_to_id(t) for t in tokens]
        return self.hexamer.decode(ids)

    # ---- encoding: every path ends in the hexamer tokenizer's ids
    def tokenize(self, text: str, **kwargs: Any) -> list[str]:
        return self.hexamer.convert_ids_to_tokens(self.hexamer.encode(text))

    def _tokenize(self, text: str, **kwargs: Any) -> list[str]:
        return self.tokenize(text)

    def _encode_plus(self, text: Any, text_pair: Any = None, **kwargs: Any) -> Any:
        if isinstance(text, str):
            text = self.hexamer.encode(text)
        if isinstance(text_pair, str):
            text_pair = self.hexamer.encode(text_pair)
        if isinstance(text, list) and not text and text_pair is None:
            keep = {
                k: v
                for k, v in kwargs.items()
                if k
                in (
                    "add_special_tokens",
                    "max_length",
                    "return_tensors",
                    "return_attention_mask",
                    "return_token_type_ids",
                    "return_length",
                    "padding_side",
                    "pad_to_multiple_of",
                )
            }
            strategy = kwargs.get("padding_strategy")
            keep["padding"] = strategy.value if strategy is not None else False
            return self.prepare_for_model([], **keep)
        return super()._encode_plus(text=text, text_pair=text_pair, **kwargs)

    def build_inputs_with_special_tokens(
        self, token_ids_0: list[int], token_ids_1: list[int] | None = None
    ) -> list[int]:
        return list(token_ids_0) + list(token_ids_1 or [])

    def num_special_tokens_to_add(self, pair: bool = False) -> int:
        return 0

    # ---- decoding
    def _decode(self, token_ids: Any, skip_special_tokens: bool = False, **kwargs: Any) -> str:
        if isinstance(token_ids, int):
            token_ids = [token_ids]
        return self.hexamer.decode(token_ids, skip_special_tokens=skip_special_tokens)

    # ---- saving: the official file layout, loadable by hexamer and by the original code
    def save_pretrained(
        self, save_directory: str | os.PathLike[str], *args: Any, **kwargs: Any
    ) -> tuple[str, ...]:
        out = self.hexamer.save_pretrained(save_directory)
        return tuple(str(p) for p in sorted(Path(out).glob("*.json")))

    def save_vocabulary(self, save_directory: str, filename_prefix: str | None = None) -> tuple[str, ...]:
        return self.save_pretrained(save_directory)


def to_transformers(tokenizer: CarbonTokenizer, **kwargs: Any) -> HexamerHFTokenizer:
    """Wrap an existing :class:`CarbonTokenizer` for ``transformers``."""
    return HexamerHFTokenizer(tokenizer, **kwargs)
