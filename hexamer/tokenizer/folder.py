"""Read a Carbon model folder's tokenizer files as data only, and check that they agree.

A Carbon checkpoint ships ``tokenizer.py`` and an ``auto_map`` that tell ``transformers`` to run it
(``trust_remote_code``). hexamer never imports or executes anything from the folder: it reads
``tokenizer.json`` (the base byte-level BPE), ``dna_config.json`` and the JSON configs, and derives
the DNA block itself. Any inconsistency (a DNA block that does not fit the BPE, a ``config.json``
vocabulary of another size) is reported with the file and field that disagree.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from hexamer.folder_files import checked_file, read_json_object
from hexamer.tokenizer.layout import DNA_SPECIAL_TOKENS, DnaLayout

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "dna_config.json",
    "added_tokens.json",
    "special_tokens_map.json",
    "config.json",
    "generation_config.json",
)
# Everything a model needs from the hub; never *.py, so no remote code is even downloaded.
MODEL_FILE_PATTERNS = ["*.json", "*.safetensors", "*.md", "*.txt"]


class ModelFolderError(ValueError):
    """A model folder is missing a file or its files contradict each other."""


def resolve_model_dir(
    name_or_path: str | os.PathLike[str],
    revision: str | None = None,
    allow_patterns: list[str] | None = None,
) -> Path:
    """A local folder as is, or a Hugging Face hub id (``org/name``) downloaded to the local cache.

    Only JSON, safetensors and text files are fetched: code files are never downloaded.
    """
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return path
    text = str(name_or_path)
    looks_like_repo = text.count("/") == 1 and not text.startswith((".", "/", "~")) and not path.exists()
    if not looks_like_repo:
        raise ModelFolderError(f"model folder {text!r} does not exist")
    try:
        from huggingface_hub import snapshot_download

        local = snapshot_download(
            repo_id=text, revision=revision, allow_patterns=allow_patterns or MODEL_FILE_PATTERNS
        )
    except Exception as exc:  # network, auth, missing repo: one clear message
        raise ModelFolderError(
            f"{text!r} is not a local folder and could not be fetched from the Hugging Face hub: {exc}"
        ) from exc
    return Path(local)


def read_json(path: Path, root: Path | None = None) -> dict[str, Any] | None:
    """A JSON object from ``path`` in the model folder ``root`` (default: ``path``'s folder),
    ``None`` when the file is absent, a clear error naming it when it is malformed, not a regular
    file (a FIFO would block the read), a broken symlink or a symlink out of the folder."""
    if not os.path.lexists(path):
        return None
    try:
        checked_file(path, path.parent if root is None else root)
    except (OSError, ValueError) as exc:
        raise ModelFolderError(str(exc)) from None
    try:
        return read_json_object(path)
    except ValueError as exc:
        raise ModelFolderError(str(exc)) from None


def _token_content(value: Any) -> str | None:
    """Special tokens are written either as strings or as AddedToken dicts with ``content``."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def _first_id(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, list) and value and isinstance(value[0], int):
        return value[0]
    return None


def _coalesce(*values: int | None) -> int | None:
    return next((v for v in values if v is not None), None)


@dataclass
class TokenizerFiles:
    """Everything hexamer takes from a folder to build the hybrid tokenizer."""

    folder: Path
    bpe: Tokenizer
    base_vocab: dict[str, int]  # BPE + base added tokens (ids below dna_start_id)
    layout: DnaLayout
    auto_dna_tags: bool
    eos_token_id: int | None
    pad_token_id: int | None
    model_max_length: int | None
    tokenizer_json: dict[str, Any]


def _base_tokenizer_json(tok_json: dict[str, Any], dna_start: int) -> dict[str, Any]:
    """``tokenizer.json`` without any token at or above ``dna_start``: some saves list the DNA
    block as added tokens, and the BPE must never match those (``AAAAAA`` in text is BPE text)."""
    data = json.loads(json.dumps(tok_json))
    data["added_tokens"] = [t for t in data.get("added_tokens") or [] if int(t["id"]) < dna_start]
    model = data.get("model") or {}
    vocab = model.get("vocab")
    if isinstance(vocab, dict):
        model["vocab"] = {t: i for t, i in vocab.items() if i < dna_start}
    data["truncation"] = None
    data["padding"] = None
    return data


def _read_bpe_json(folder: Path) -> dict[str, Any]:
    """``tokenizer.json``, checked to hold a byte-level BPE with a vocabulary."""
    tok_path = folder / "tokenizer.json"
    if not os.path.lexists(tok_path):
        present = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
        raise ModelFolderError(
            f"{folder} has no tokenizer.json (the base BPE of a Carbon-format folder); files present: {present}"
        )
    tok_json = read_json(tok_path)
    assert tok_json is not None
    model = tok_json.get("model") or {}
    if model.get("type") != "BPE" or not isinstance(model.get("vocab"), dict):
        raise ModelFolderError(
            f"{tok_path}: model.type must be 'BPE' with a vocab, got {model.get('type')!r}"
        )
    return tok_json


def _known_tokens(tok_json: dict[str, Any]) -> dict[str, int]:
    """Every (token -> id) ``tokenizer.json`` knows, base and DNA alike."""
    all_tokens: dict[str, int] = dict(tok_json["model"]["vocab"])
    for entry in tok_json.get("added_tokens") or []:
        all_tokens[entry["content"]] = int(entry["id"])
    return all_tokens


def _dna_layout(
    folder: Path, dna_cfg: dict[str, Any] | None, tok_cfg: dict[str, Any], all_tokens: dict[str, int]
) -> DnaLayout:
    """The DNA block as ``dna_config.json`` describes it (or, without one, right after the base
    vocabulary with ``tokenizer_config.json``'s ``k``)."""
    k = 6
    specials = list(DNA_SPECIAL_TOKENS)
    dna_start: int | None = None
    if dna_cfg is not None:
        k = dna_cfg.get("k", 6)
        specials = dna_cfg.get("dna_special_tokens", specials)
        dna_start = dna_cfg.get("dna_start_id")
        if not isinstance(k, int) or isinstance(k, bool):
            raise ModelFolderError(f"{folder / 'dna_config.json'}: 'k' must be an integer, got {k!r}")
        if not isinstance(specials, list) or not all(isinstance(s, str) for s in specials):
            raise ModelFolderError(
                f"{folder / 'dna_config.json'}: 'dna_special_tokens' must be a list of strings"
            )
    else:
        k = tok_cfg.get("k", 6)
    if dna_start is None:
        # the official tokenizer puts the block right after the base vocabulary
        dna_start = all_tokens.get("<dna>", max(all_tokens.values(), default=-1) + 1)
    if not isinstance(dna_start, int) or isinstance(dna_start, bool):
        raise ModelFolderError(
            f"{folder / 'dna_config.json'}: 'dna_start_id' must be an integer, got {dna_start!r}"
        )
    try:
        return DnaLayout(dna_start_id=dna_start, k=k, special_tokens=tuple(specials))
    except ValueError as exc:
        raise ModelFolderError(f"{folder / 'dna_config.json'}: {exc}") from exc


def _check_layout_agrees(
    layout: DnaLayout,
    dna_cfg: dict[str, Any] | None,
    all_tokens: dict[str, int],
    added_json: dict[str, Any],
    model_cfg: dict[str, Any] | None,
) -> None:
    """The DNA block fits the BPE below it, and every file that states a size or a tag's id agrees."""
    dna_start, k = layout.dna_start_id, layout.k
    base_ids = sorted({i for i in all_tokens.values() if i < dna_start})
    if len(base_ids) != dna_start or (base_ids and base_ids[-1] != dna_start - 1):
        raise ModelFolderError(
            f"dna_config.json says dna_start_id={dna_start}, but tokenizer.json defines {len(base_ids)} distinct "
            f"ids below it (ids 0..{dna_start - 1} must all exist: the DNA block starts right after the base "
            "vocabulary)"
        )
    if (
        dna_cfg is not None
        and "dna_vocab_size" in dna_cfg
        and dna_cfg["dna_vocab_size"] != layout.dna_vocab_size
    ):
        raise ModelFolderError(
            f"dna_config.json says dna_vocab_size={dna_cfg['dna_vocab_size']}, but 3 tags + {layout.n_kmers} "
            f"{k}-mers padded to a multiple of 128 after dna_start_id={dna_start} give {layout.dna_vocab_size}"
        )
    # DNA tokens that the files list explicitly must sit where the layout puts them
    for source, mapping in (("tokenizer.json", all_tokens), ("added_tokens.json", added_json)):
        for offset, name in enumerate(layout.special_tokens):
            found = mapping.get(name)
            if found is not None and found != dna_start + offset:
                raise ModelFolderError(
                    f"{source} gives {name} the id {found}, but the DNA layout puts it at {dna_start + offset}"
                )
    if model_cfg is not None and "vocab_size" in model_cfg and model_cfg["vocab_size"] != layout.vocab_size:
        raise ModelFolderError(
            f"config.json says vocab_size={model_cfg['vocab_size']}, but the tokenizer's layout (base vocabulary "
            f"{dna_start} + DNA block {layout.dna_vocab_size}) gives {layout.vocab_size}"
        )


def _special_ids(
    layout: DnaLayout,
    base_vocab: dict[str, int],
    gen_cfg: dict[str, Any],
    special_map: dict[str, Any],
    tok_cfg: dict[str, Any],
) -> tuple[int | None, int | None]:
    """``(eos, pad)``: ``generation_config.json``'s ids first, then the special-token names of
    ``special_tokens_map.json`` and ``tokenizer_config.json``; eos falls back to ``<|endoftext|>``,
    pad to eos."""

    def lookup(value: Any) -> int | None:
        name = _token_content(value)
        return base_vocab.get(name) if name is not None else None

    eos = _first_id(gen_cfg.get("eos_token_id"))
    if eos is None:
        eos = _coalesce(lookup(special_map.get("eos_token")), lookup(tok_cfg.get("eos_token")))
    if eos is None:
        eos = base_vocab.get("<|endoftext|>")
    pad = _first_id(gen_cfg.get("pad_token_id"))
    if pad is None:
        pad = _coalesce(lookup(special_map.get("pad_token")), lookup(tok_cfg.get("pad_token")))
    if pad is None:
        pad = eos
    for name, value in (("eos_token_id", eos), ("pad_token_id", pad)):
        if value is not None and not 0 <= value < layout.vocab_size:
            raise ModelFolderError(f"{name}={value} is outside the vocabulary [0, {layout.vocab_size})")
    return eos, pad


def _model_max_length(tok_cfg: dict[str, Any], model_cfg: dict[str, Any] | None) -> int | None:
    """``tokenizer_config.json``'s ``model_max_length`` unless absent or a "no limit" sentinel, then
    ``config.json``'s ``max_position_embeddings``."""
    max_len = tok_cfg.get("model_max_length")
    if not isinstance(max_len, int) or max_len > 10**9:
        max_len = (model_cfg or {}).get("max_position_embeddings")
    return max_len if isinstance(max_len, int) else None


def load_tokenizer_files(folder: Path, auto_dna_tags: bool | None = None) -> TokenizerFiles:
    """Read and cross-check the tokenizer files of a Carbon-format folder."""
    tok_json = _read_bpe_json(folder)
    dna_cfg = read_json(folder / "dna_config.json")
    tok_cfg = read_json(folder / "tokenizer_config.json") or {}
    added_json = read_json(folder / "added_tokens.json") or {}
    special_map = read_json(folder / "special_tokens_map.json") or {}
    model_cfg = read_json(folder / "config.json")
    gen_cfg = read_json(folder / "generation_config.json") or {}

    all_tokens = _known_tokens(tok_json)
    layout = _dna_layout(folder, dna_cfg, tok_cfg, all_tokens)
    _check_layout_agrees(layout, dna_cfg, all_tokens, added_json, model_cfg)
    dna_start = layout.dna_start_id
    base_json = _base_tokenizer_json(tok_json, dna_start)
    try:
        bpe = Tokenizer.from_str(json.dumps(base_json))
    except Exception as exc:
        raise ModelFolderError(
            f"{folder / 'tokenizer.json'} could not be loaded by the tokenizers library: {exc}"
        ) from exc
    base_vocab = {t: i for t, i in all_tokens.items() if i < dna_start}
    eos, pad = _special_ids(layout, base_vocab, gen_cfg, special_map, tok_cfg)
    if auto_dna_tags is None:
        source = dna_cfg if dna_cfg is not None and "auto_dna_tags" in dna_cfg else tok_cfg
        auto_dna_tags = bool(source.get("auto_dna_tags", False))
    return TokenizerFiles(
        folder=folder,
        bpe=bpe,
        base_vocab=base_vocab,
        layout=layout,
        auto_dna_tags=auto_dna_tags,
        eos_token_id=eos,
        pad_token_id=pad,
        model_max_length=_model_max_length(tok_cfg, model_cfg),
        tokenizer_json=base_json,
    )
