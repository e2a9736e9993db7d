"""The hybrid Carbon tokenizer: byte-level BPE for text, non-overlapping 6-mers inside ``<dna>``.

It reproduces the ids of the official ``HybridDNATokenizer`` (``shared/spec/tokenizer_fns.md`` §2)
from the folder's data files alone, and adds what pipelines need: numpy DNA fast paths, left or right
padding, the official ``token_mask``, character offsets and base <-> token maps.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import warnings
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from tokenizers import Tokenizer

from hexamer.tokenizer.dna import decode_kmers, encode_dna, encode_kmers
from hexamer.tokenizer.encoding import (
    MASK_PADDING,
    MASK_STRUCTURAL,
    MASK_TEXT,
    BatchEncoding,
    DnaSpan,
    Encoding,
    stack_padded,
)
from hexamer.tokenizer.folder import load_tokenizer_files, resolve_model_dir
from hexamer.tokenizer.layout import DnaLayout
from hexamer.tokenizer.segment import CLOSE_TAG, OPEN_TAG, Segment, split_segments

#: A run this long of A/C/G/T outside ``<dna>`` is almost surely DNA the user forgot to tag.
UNTAGGED_DNA_WARN_BP = 24
_UNTAGGED_DNA = re.compile(rf"[ACGTacgt]{{{UNTAGGED_DNA_WARN_BP},}}")

TokenIds = Sequence[int] | np.ndarray | Any  # also torch tensors


class UntaggedDnaWarning(UserWarning):
    """DNA given as plain text is BPE-tokenised and Carbon's quality collapses: wrap it in <dna>."""


class CarbonTokenizer:
    """Hybrid BPE + k-mer tokenizer for Carbon-format model folders (no remote code).

    >>> tok = CarbonTokenizer.from_pretrained("path/to/Carbon-3B")      # doctest: +SKIP
    >>> tok.encode("<mammalian_species><dna>ATCGATCG</dna>")            # doctest: +SKIP
    """

    def __init__(
        self,
        bpe: Tokenizer,
        layout: DnaLayout,
        *,
        eos_token_id: int | None = None,
        pad_token_id: int | None = None,
        auto_dna_tags: bool = False,
        model_max_length: int | None = None,
        name_or_path: str | None = None,
        base_vocab: dict[str, int] | None = None,
        tokenizer_json: dict[str, Any] | None = None,
    ) -> None:
        self._bpe = bpe
        self.layout = layout
        self.eos_token_id = eos_token_id
        self.pad_token_id = pad_token_id if pad_token_id is not None else eos_token_id
        self.auto_dna_tags = auto_dna_tags
        self.model_max_length = model_max_length
        self.name_or_path = name_or_path
        self._base_vocab = (
            dict(base_vocab) if base_vocab is not None else bpe.get_vocab(with_added_tokens=True)
        )
        self._tokenizer_json = tokenizer_json
        self._special_ids = {i for i in (self.eos_token_id, self.pad_token_id) if i is not None}

    # ------------------------------------------------------------------ loading and saving
    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str | os.PathLike[str],
        *,
        revision: str | None = None,
        auto_dna_tags: bool | None = None,
    ) -> CarbonTokenizer:
        """Load from a Carbon-format folder, or a hub id such as ``org/Carbon-3B`` (JSON files only)."""
        folder = resolve_model_dir(name_or_path, revision=revision, allow_patterns=["*.json"])
        files = load_tokenizer_files(folder, auto_dna_tags=auto_dna_tags)
        return cls(
            files.bpe,
            files.layout,
            eos_token_id=files.eos_token_id,
            pad_token_id=files.pad_token_id,
            auto_dna_tags=files.auto_dna_tags,
            model_max_length=files.model_max_length,
            name_or_path=str(name_or_path),
            base_vocab=files.base_vocab,
            tokenizer_json=files.tokenizer_json,
        )

    def save_pretrained(self, directory: str | os.PathLike[str]) -> Path:
        """Write the tokenizer files in the official layout (``tokenizer.json``, ``dna_config.json``,
        ``tokenizer_config.json``, ``special_tokens_map.json``, ``added_tokens.json``)."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        if self._tokenizer_json is not None:
            (out / "tokenizer.json").write_text(json.dumps(self._tokenizer_json, ensure_ascii=False), "utf-8")
        else:
            self._bpe.save(str(out / "tokenizer.json"))
        eos = self.id_to_token(self.eos_token_id) if self.eos_token_id is not None else None
        pad = self.id_to_token(self.pad_token_id) if self.pad_token_id is not None else None
        files = {
            "dna_config.json": self.layout.dna_config(self.auto_dna_tags),
            "tokenizer_config.json": {
                "tokenizer_class": "HybridDNATokenizer",
                "k": self.layout.k,
                "auto_dna_tags": self.auto_dna_tags,
                "eos_token": eos,
                "pad_token": pad,
                "model_max_length": self.model_max_length,
                "clean_up_tokenization_spaces": False,
            },
            "special_tokens_map.json": {"eos_token": eos, "pad_token": pad},
            "added_tokens.json": {
                name: self.layout.dna_start_id + i for i, name in enumerate(self.layout.special_tokens)
            },
        }
        for name, content in files.items():
            (out / name).write_text(json.dumps(content, indent=2) + "\n", "utf-8")
        return out

    def copy_files_to(self, directory: str | os.PathLike[str]) -> None:
        """Copy this tokenizer's original files when it came from a folder, else save them."""
        src = Path(self.name_or_path) if self.name_or_path else None
        if src is not None and src.is_dir():
            for name in (
                "tokenizer.json",
                "dna_config.json",
                "tokenizer_config.json",
                "special_tokens_map.json",
                "added_tokens.json",
            ):
                if (src / name).is_file():
                    shutil.copy2(src / name, Path(directory) / name)
        else:
            self.save_pretrained(directory)

    # ------------------------------------------------------------------ vocabulary
    @property
    def k(self) -> int:
        return self.layout.k

    @property
    def vocab_size(self) -> int:
        """Total vocabulary including the DNA block and ``<unused_i>`` pads (155,776 for Carbon)."""
        return self.layout.vocab_size

    def __len__(self) -> int:
        return self.layout.vocab_size

    @property
    def dna_begin_id(self) -> int:
        return self.layout.begin_id

    @property
    def dna_end_id(self) -> int:
        return self.layout.end_id

    @property
    def oov_token_id(self) -> int:
        return self.layout.oov_id

    @property
    def kmer_start(self) -> int:
        return self.layout.kmer_start

    def get_vocab(self) -> dict[str, int]:
        """token -> id like the official ``get_vocab``: where a k-mer equals a BPE token (``CCCCCC``)
        the BPE id wins, so this has one entry fewer than ``len(self)`` for Carbon."""
        vocab = {self.layout.dna_token_string(i): i for i in range(self.layout.dna_start_id, self.vocab_size)}
        vocab.update(self._base_vocab)
        return vocab

    def token_to_id(self, token: str) -> int | None:
        """Id of a token string (BPE first, as in ``get_vocab``); ``None`` if unknown."""
        found = self._base_vocab.get(token)
        if found is not None:
            return found
        layout = self.layout
        if token in layout.special_tokens:
            return layout.dna_start_id + layout.special_tokens.index(token)
        if len(token) == layout.k and all(c in "ACGT" for c in token):
            return layout.kmer_id(token)
        if token.startswith("<unused_") and token.endswith(">"):
            try:
                index = int(token[8:-1])
            except ValueError:
                return None
            return layout.kmer_stop + index if 0 <= index < layout.n_unused else None
        return None

    def id_to_token(self, token_id: int) -> str:
        """String of one id (byte-level form for BPE ids, bases for k-mers)."""
        token_id = int(token_id)
        self._check_range(token_id)
        if self.layout.is_dna(token_id):
            return self.layout.dna_token_string(token_id)
        token = self._bpe.id_to_token(token_id)
        if token is None:
            raise ValueError(f"token id {token_id} is not in the base vocabulary")
        return token

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> list[str]:
        return [self.id_to_token(i) for i in ids]

    def _check_range(self, token_id: int) -> None:
        if not 0 <= token_id < self.vocab_size:
            raise ValueError(
                f"token id {token_id} is out of range: the vocabulary has ids 0..{self.vocab_size - 1}"
            )

    # ------------------------------------------------------------------ encoding
    def encode(self, text: str, *, auto_dna_tags: bool | None = None) -> list[int]:
        """Token ids of one string, exactly as the official tokenizer's ``encode``. No BOS/EOS is added."""
        return self.encode_plus(text, auto_dna_tags=auto_dna_tags).ids

    def encode_plus(self, text: str, *, auto_dna_tags: bool | None = None) -> Encoding:
        """Ids plus ``token_mask``, character offsets and the DNA spans (base <-> token map)."""
        return self.encode_batch([text], auto_dna_tags=auto_dna_tags)[0]

    def encode_batch(self, texts: Sequence[str], *, auto_dna_tags: bool | None = None) -> list[Encoding]:
        """Encode many strings; all BPE text goes through the Rust tokenizer in one parallel call."""
        if isinstance(texts, str):
            raise TypeError("encode_batch takes a list of strings; use encode() for one string")
        wrap = self.auto_dna_tags if auto_dna_tags is None else auto_dna_tags
        prepared: list[str] = []
        shifts: list[int] = []  # wrapped inputs: offsets are reported in the caller's text
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"input {i} is a {type(text).__name__}, expected str")
            wrapped = wrap and OPEN_TAG not in text
            prepared.append(f"{OPEN_TAG}{text}{CLOSE_TAG}" if wrapped else text)
            shifts.append(len(OPEN_TAG) if wrapped else 0)
        all_segments = [split_segments(t) for t in prepared]
        text_pieces = [
            t[s.start : s.end]
            for t, segs in zip(prepared, all_segments, strict=True)
            for s in segs
            if not s.is_dna
        ]
        warned = False
        for piece in text_pieces:
            if not warned and _UNTAGGED_DNA.search(piece):
                warnings.warn(
                    f"a run of {UNTAGGED_DNA_WARN_BP}+ A/C/G/T characters is outside <dna>...</dna> and will be "
                    "BPE-tokenised as English text; wrap DNA as <dna>SEQ</dna> (or set auto_dna_tags=True)",
                    UntaggedDnaWarning,
                    stacklevel=3,
                )
                warned = True
        bpe_out = iter(self._bpe.encode_batch(text_pieces, add_special_tokens=False) if text_pieces else ())
        return [
            self._assemble(text, segments, bpe_out, shift)
            for text, segments, shift in zip(prepared, all_segments, shifts, strict=True)
        ]

    def _assemble(self, text: str, segments: list[Segment], bpe_out: Iterator[Any], shift: int) -> Encoding:
        layout = self.layout
        k = layout.k
        id_parts: list[np.ndarray] = []
        mask_parts: list[np.ndarray] = []
        offset_parts: list[Any] = []  # built into character offsets only on demand
        spans: list[DnaSpan] = []
        n = 0
        for seg in segments:
            if not seg.is_dna:
                enc = next(bpe_out)
                id_parts.append(np.asarray(enc.ids, dtype=np.int64))
                mask_parts.append(np.full(len(enc.ids), MASK_TEXT, dtype=np.int8))
                offset_parts.append(("text", seg.start, enc.offsets))
                n += len(enc.ids)
                continue
            if seg.has_open:
                id_parts.append(np.array([layout.begin_id], dtype=np.int64))
                mask_parts.append(np.array([MASK_STRUCTURAL], dtype=np.int8))
                offset_parts.append(("tag", seg.start, seg.start + len(OPEN_TAG)))
                n += 1
            if seg.content_end > seg.content_start:
                dna = encode_dna(text[seg.content_start : seg.content_end], layout)
                id_parts.append(dna.ids)
                mask_parts.append(dna.n_real)
                offset_parts.append(("dna", seg.content_start, seg.content_end, len(dna.ids)))
                spans.append(DnaSpan(n, n + len(dna.ids), seg.content_start, seg.content_end, dna.n_bases, k))
                n += len(dna.ids)
            if seg.has_close:
                id_parts.append(np.array([layout.end_id], dtype=np.int64))
                mask_parts.append(np.array([MASK_STRUCTURAL], dtype=np.int8))
                offset_parts.append(("tag", seg.end - len(CLOSE_TAG), seg.end))
                n += 1
        limit = len(text) - shift - (len(CLOSE_TAG) if shift else 0)

        def move(pos: int) -> int:  # wrapped inputs report offsets in the caller's text
            return min(max(pos - shift, 0), limit) if shift else pos

        if shift:
            spans = [
                DnaSpan(s.token_start, s.token_stop, move(s.char_start), move(s.char_end), s.n_bases, s.k)
                for s in spans
            ]

        def offsets() -> list[tuple[int, int]]:
            out: list[tuple[int, int]] = []
            for part in offset_parts:
                if part[0] == "text":
                    out.extend((move(part[1] + a), move(part[1] + b)) for a, b in part[2])
                elif part[0] == "tag":
                    out.append((move(part[1]), move(part[2])))
                else:
                    _, c0, c1, count = part
                    starts = np.minimum(c0 + k * np.arange(count), c1)
                    ends = np.minimum(starts + k, c1)
                    out.extend(zip(map(move, starts.tolist()), map(move, ends.tolist()), strict=True))
            return out

        ids = np.concatenate(id_parts) if id_parts else np.zeros(0, dtype=np.int64)
        mask = np.concatenate(mask_parts) if mask_parts else np.zeros(0, dtype=np.int8)
        return Encoding(ids, mask, spans, offsets)

    def encode_dna(self, sequence: str | bytes, *, tags: bool = True) -> np.ndarray:
        """int64 ids of one DNA sequence, as ``encode('<dna>' + seq + '</dna>')`` would give, without
        Python work per base (the vectorised fast path). ``tags=False`` returns the k-mers only."""
        content = sequence.strip()
        if not tags:
            return encode_kmers(content, self.layout)
        ids = encode_kmers(content, self.layout, lead=1, trail=1)
        ids[0], ids[-1] = self.layout.begin_id, self.layout.end_id
        return ids

    def __call__(
        self,
        text: str | Sequence[str],
        *,
        padding: bool | Literal["longest", "max_length", "do_not_pad"] = False,
        padding_side: Literal["right", "left"] = "right",
        truncation: bool = False,
        max_length: int | None = None,
        return_tensors: Literal["pt", "np"] | None = None,
        return_token_mask: bool = False,
        return_offsets_mapping: bool = False,
        add_special_tokens: bool = False,
        auto_dna_tags: bool | None = None,
    ) -> BatchEncoding:
        """Batch encoding with ``input_ids`` and ``attention_mask`` (and ``token_mask`` on request).

        Matches the official ``__call__`` for its default right padding with the pad id (151643);
        unlike it, ``padding_side='left'`` is honoured (what generation wants) and truncation follows
        the usual ``transformers`` rule (only with ``truncation=True`` and ``max_length``).
        ``add_special_tokens`` is accepted for compatibility and never adds BOS/EOS, like the original.
        """
        if padding_side not in ("right", "left"):
            raise ValueError(f"padding_side must be 'right' or 'left', got {padding_side!r}")
        if return_tensors not in (None, "pt", "np"):
            raise ValueError(f"return_tensors must be None, 'pt' or 'np', got {return_tensors!r}")
        single = isinstance(text, str)
        texts = [text] if single else list(text)
        encodings = self.encode_batch(texts, auto_dna_tags=auto_dna_tags)
        rows = [e.input_ids for e in encodings]
        masks = [e.mask for e in encodings]
        offs = [e.offsets for e in encodings] if return_offsets_mapping else []
        if truncation and max_length is not None:
            rows = [r[:max_length] for r in rows]
            masks = [m[:max_length] for m in masks]
            offs = [o[:max_length] for o in offs]
        pad_mode = "longest" if padding is True else (padding or "do_not_pad")
        if pad_mode not in ("longest", "max_length", "do_not_pad"):
            raise ValueError(
                f"padding must be True/False, 'longest', 'max_length' or 'do_not_pad', got {padding!r}"
            )
        if pad_mode == "max_length" and max_length is None:
            raise ValueError("padding='max_length' needs max_length")
        if return_tensors is not None and pad_mode == "do_not_pad" and len({len(r) for r in rows}) > 1:
            raise ValueError("sequences have different lengths: pass padding=True to return tensors")
        if pad_mode != "do_not_pad" and self.pad_token_id is None:
            raise ValueError("this tokenizer has no pad token id; cannot pad")

        out = BatchEncoding()
        if pad_mode == "do_not_pad":
            out["input_ids"] = [r.tolist() for r in rows]
            out["attention_mask"] = [[1] * len(r) for r in rows]
            if return_token_mask:
                out["token_mask"] = [m.tolist() for m in masks]
            if return_offsets_mapping:
                out["offset_mapping"] = offs
        else:
            longest = max((len(r) for r in rows), default=0)
            length = max(longest, max_length or 0) if pad_mode == "max_length" else longest
            left = padding_side == "left"
            out["input_ids"] = stack_padded(rows, self.pad_token_id, length, left)  # type: ignore[arg-type]
            out["attention_mask"] = stack_padded(
                [np.ones(len(r), dtype=np.int64) for r in rows], 0, length, left
            )
            if return_token_mask:
                out["token_mask"] = stack_padded(masks, MASK_PADDING, length, left)
            if return_offsets_mapping:
                pad = (0, 0)
                out["offset_mapping"] = [
                    ([pad] * (length - len(o)) + o) if left else (o + [pad] * (length - len(o))) for o in offs
                ]
            if return_tensors is None:
                for key in ("input_ids", "attention_mask", "token_mask"):
                    if key in out:
                        out[key] = out[key].tolist()
        if return_tensors is not None:
            for key in ("input_ids", "attention_mask", "token_mask"):
                if key in out:
                    arr = np.asarray(out[key], dtype=np.int64)
                    if arr.ndim == 1:
                        arr = arr[None, :] if single else arr.reshape(len(rows), -1)
                    out[key] = _to_tensor(arr) if return_tensors == "pt" else arr
        elif single:
            for key in list(out):
                out[key] = out[key][0]
        return out

    # ------------------------------------------------------------------ decoding
    def decode(self, ids: TokenIds, *, skip_special_tokens: bool = False) -> str:
        """Text of ids, by the official rules: bases for k-mers (inside or outside ``<dna>``), BPE
        text for the rest; padded tail ``A``s are kept. ``skip_special_tokens`` drops EOS/pad and
        the DNA tags."""
        arr = _as_id_array(ids)
        if arr.size and (arr.min() < 0 or arr.max() >= self.vocab_size):
            bad_pos = int(np.flatnonzero((arr < 0) | (arr >= self.vocab_size))[0])
            raise ValueError(
                f"token id {int(arr[bad_pos])} at position {bad_pos} is out of range: "
                f"the vocabulary has ids 0..{self.vocab_size - 1}"
            )
        if skip_special_tokens and self._special_ids:
            arr = arr[~np.isin(arr, list(self._special_ids))]
        layout = self.layout
        is_kmer = (arr >= layout.kmer_start) & (arr < layout.kmer_stop)
        others = np.flatnonzero(~is_kmer).tolist()
        parts: list[str] = []
        bpe_run: list[int] = []
        in_region = False

        def flush_bpe() -> None:
            if bpe_run:
                parts.append(self._bpe.decode(bpe_run, skip_special_tokens=skip_special_tokens))
                bpe_run.clear()

        pos = 0
        for b in [*others, arr.size]:
            if b > pos:  # a run of k-mers
                flush_bpe()
                parts.append(decode_kmers(arr[pos:b], layout))
            if b == arr.size:
                break
            t = int(arr[b])
            pos = b + 1
            if in_region:
                if t == layout.end_id:
                    in_region = False
                    if not skip_special_tokens:
                        parts.append(CLOSE_TAG)
                elif layout.is_dna(t):
                    parts.append(layout.dna_token_string(t))
                # BPE ids inside a region are dropped, as in the official decode
                continue
            if t == layout.begin_id:
                flush_bpe()
                in_region = True
                if not skip_special_tokens:
                    parts.append(OPEN_TAG)
            elif layout.is_dna(t):
                flush_bpe()
                if not (skip_special_tokens and t in (layout.end_id, layout.oov_id)):
                    parts.append(layout.dna_token_string(t))
            else:
                bpe_run.append(t)
        flush_bpe()
        return "".join(parts)

    def batch_decode(self, sequences: Iterable[TokenIds], *, skip_special_tokens: bool = False) -> list[str]:
        return [self.decode(s, skip_special_tokens=skip_special_tokens) for s in sequences]

    def decode_dna(self, ids: TokenIds, n_bases: int | None = None) -> str:
        """Bases of the k-mer ids only (tags, ``<oov>`` as ``N``s, anything else rejected), trimmed
        to ``n_bases`` when given: what base-level generation returns."""
        arr = _as_id_array(ids)
        layout = self.layout
        arr = arr[(arr != layout.begin_id) & (arr != layout.end_id)]
        oov = arr == layout.oov_id
        if oov.any():
            filler = layout.kmer_start  # decoded then overwritten with N
            text = bytearray(decode_kmers(np.where(oov, filler, arr), layout).encode("ascii"))
            for t in np.flatnonzero(oov).tolist():
                text[t * layout.k : (t + 1) * layout.k] = b"N" * layout.k
            bases = text.decode("ascii")
        else:
            bases = decode_kmers(arr, layout)
        return bases if n_bases is None else bases[:n_bases]

    def __repr__(self) -> str:
        return (
            f"CarbonTokenizer(name_or_path={self.name_or_path!r}, vocab_size={self.vocab_size}, "
            f"dna_start_id={self.layout.dna_start_id}, k={self.k}, eos={self.eos_token_id}, pad={self.pad_token_id})"
        )


def _as_id_array(ids: TokenIds) -> np.ndarray:
    if hasattr(ids, "detach"):  # torch tensor, without importing torch
        ids = ids.detach().cpu().numpy()
    arr = np.asarray(ids)
    if arr.ndim != 1:
        arr = arr.reshape(-1) if arr.ndim == 2 and arr.shape[0] == 1 else arr
    if arr.ndim != 1:
        raise ValueError(
            f"decode takes one sequence of ids, got an array of shape {arr.shape}; use batch_decode"
        )
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"token ids must be integers, got dtype {arr.dtype}")
    return arr.astype(np.int64, copy=False)


def _to_tensor(arr: np.ndarray) -> Any:
    import torch

    return torch.from_numpy(np.ascontiguousarray(arr))
