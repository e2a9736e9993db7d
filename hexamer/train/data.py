"""Training data: sequence files -> train/held-out splits -> random windows -> labelled batches.

Each window is written as the Carbon template ``TAG<dna>BASES</dna>`` (``TAG`` optional plain
text), and the labels follow the official ``token_mask`` semantics so only real bases are trained:

* a label is supervised only if it is a k-mer token with at least one real base: the tag's BPE
  tokens, ``<dna>`` and ``</dna>`` are never targets, and neither are ``<oov>`` chunks (any
  non-ACGT base, e.g. ``N``, makes its 6-mer ``<oov>``: there is no base to supervise);
* ``valid_len`` holds the real bases of each label token (6, or r < 6 for the ``A``-padded tail),
  so the FNS loss skips the padding ``A``s and token CE skips the padded token.

Batches are a pure function of ``(seed, step)``: a resumed run draws exactly the batches the
uninterrupted run would have drawn, with no generator state to save.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

from hexamer.io import BadRecord, SequenceInputError, normalize_sequence, read_sequences, reverse_complement
from hexamer.tokenizer import CarbonTokenizer
from hexamer.tokenizer.dna import encode_dna

__all__ = [
    "IGNORE_INDEX",
    "Batch",
    "Corpus",
    "Example",
    "Segment",
    "WindowSampler",
    "batches",
    "build_example",
    "collate",
    "load_corpus",
    "step_rng",
    "tokens_per_window",
    "validation_windows",
]

IGNORE_INDEX = -100


@dataclass(frozen=True)
class Segment:
    """A stretch of one input sequence (upper-case bases) with the tag its windows are written with."""

    name: str
    bases: str
    tag: str = ""


@dataclass(frozen=True)
class Corpus:
    """The training part and the held-out part of every input sequence."""

    train: list[Segment]
    val: list[Segment]

    @property
    def train_bp(self) -> int:
        return sum(len(s.bases) for s in self.train)

    @property
    def val_bp(self) -> int:
        return sum(len(s.bases) for s in self.val)


@dataclass(frozen=True)
class Example:
    """One tokenised window. ``labels[t]`` is the target of the model output at ``input_ids[t]``."""

    input_ids: np.ndarray  # int64 (T,)
    labels: np.ndarray  # int64 (T,), IGNORE_INDEX where nothing is supervised
    valid_len: np.ndarray  # int64 (T,), real bases of each label token (0 where ignored)


@dataclass(frozen=True)
class Batch:
    """Right-padded examples as tensors (right padding needs no attention mask in a causal model)."""

    input_ids: torch.Tensor  # (B, T)
    labels: torch.Tensor  # (B, T)
    valid_len: torch.Tensor  # (B, T)

    @property
    def n_bases(self) -> int:
        return int(self.valid_len.sum())

    @property
    def n_full_tokens(self) -> int:
        """Supervised tokens whose six bases are all real (the token-CE targets)."""
        return int((self.valid_len == 6).sum())

    def to(self, device: torch.device | str) -> Batch:
        return Batch(self.input_ids.to(device), self.labels.to(device), self.valid_len.to(device))


# ---------------------------------------------------------------------------------------------
# sequences


def _read_file(path: str) -> list[tuple[str, str]]:
    if not os.path.isfile(path):
        raise FileNotFoundError(f"training data not found: {path}")
    out: list[tuple[str, str]] = []
    for rec in read_sequences(path):
        if isinstance(rec, BadRecord):
            raise SequenceInputError(path, str(rec))
        out.append((rec.id, normalize_sequence(rec.sequence).upper()))
    if not out:
        raise ValueError(f"{path}: no sequences (the file is empty)")
    return out


def load_corpus(
    data: Sequence[str],
    *,
    val_data: Sequence[str] = (),
    val_fraction: float = 0.1,
    tag: str = "",
    file_tags: dict[str, str] | None = None,
) -> Corpus:
    """Read every file and split each sequence: the last ``val_fraction`` of it is held out.

    Files in ``val_data`` are held out whole. A bad record (non-IUPAC character, empty sequence,
    duplicate id) or an empty file raises with the file and record named: training data should be
    clean, and a silently skipped record would change what the model learns.
    """
    if not data:
        raise ValueError("no training data: give at least one sequence file")
    tags = file_tags or {}
    train: list[Segment] = []
    val: list[Segment] = []
    for path in data:
        for name, bases in _read_file(path):
            n_val = round(len(bases) * val_fraction)
            cut = len(bases) - n_val
            seg_tag = tags.get(path, tag)
            if cut > 0:
                train.append(Segment(name, bases[:cut], seg_tag))
            if n_val > 0:
                val.append(Segment(f"{name}:held-out", bases[cut:], seg_tag))
    for path in val_data:
        val.extend(Segment(name, bases, tags.get(path, tag)) for name, bases in _read_file(path))
    return Corpus(train, val)


# ---------------------------------------------------------------------------------------------
# windows


class WindowSampler:
    """Random fixed-length windows from the training segments, uniform over valid start positions.

    Segments shorter than the window cannot host one and are skipped (``skipped`` names them);
    if none is long enough, construction fails with the longest length found.
    """

    def __init__(
        self, segments: Sequence[Segment], window_bp: int, *, rc_prob: float = 0.0, tag_dropout: float = 0.0
    ) -> None:
        self.window_bp = window_bp
        self.rc_prob = rc_prob
        self.tag_dropout = tag_dropout
        self.segments = [s for s in segments if len(s.bases) >= window_bp]
        self.skipped = [s.name for s in segments if len(s.bases) < window_bp]
        if not self.segments:
            longest = max((len(s.bases) for s in segments), default=0)
            raise ValueError(
                f"no training sequence is at least window_bp={window_bp} bases long "
                f"(longest: {longest} bp after the held-out split); lower --window-bp"
            )
        starts = np.array([len(s.bases) - window_bp + 1 for s in self.segments], dtype=np.float64)
        self._p = starts / starts.sum()

    def sample(self, rng: np.random.Generator, n: int) -> list[tuple[str, str]]:
        """``n`` (tag, bases) windows drawn with ``rng``."""
        out: list[tuple[str, str]] = []
        picks = rng.choice(len(self.segments), size=n, p=self._p)
        for i in picks:
            seg = self.segments[int(i)]
            start = int(rng.integers(0, len(seg.bases) - self.window_bp + 1))
            bases = seg.bases[start : start + self.window_bp]
            if self.rc_prob and rng.random() < self.rc_prob:
                bases = reverse_complement(bases)
            tag = seg.tag
            if tag and self.tag_dropout and rng.random() < self.tag_dropout:
                tag = ""
            out.append((tag, bases))
        return out


def step_rng(seed: int, step: int, micro: int = 0) -> np.random.Generator:
    """The generator of one micro-batch: independent streams keyed by (seed, step, micro)."""
    return np.random.default_rng([seed, step, micro])


def validation_windows(segments: Sequence[Segment], window_bp: int, max_bp: int = 0) -> list[tuple[str, str]]:
    """Held-out segments cut into consecutive windows (the last one of a segment may be shorter).

    ``max_bp`` > 0 keeps the first windows of every segment in turn until that many bases, so every
    genome is represented in a capped evaluation. Deterministic: no augmentation.
    """
    per_segment = [
        [(s.tag, s.bases[i : i + window_bp]) for i in range(0, len(s.bases), window_bp)] for s in segments
    ]
    out: list[tuple[str, str]] = []
    total = 0
    depth = 0
    while any(depth < len(w) for w in per_segment):
        for windows in per_segment:
            if depth < len(windows):
                if max_bp and total >= max_bp:
                    return out
                out.append(windows[depth])
                total += len(windows[depth][1])
        depth += 1
    return out


# ---------------------------------------------------------------------------------------------
# tokenisation


@lru_cache(maxsize=64)
def _tag_ids(tokenizer: CarbonTokenizer, tag: str) -> tuple[int, ...]:
    return tuple(tokenizer.encode(tag)) if tag else ()


def build_example(tokenizer: CarbonTokenizer, bases: str, tag: str = "") -> Example:
    """Tokenise ``TAG<dna>BASES</dna>`` and derive next-token labels and their real-base counts.

    ``bases`` are already stripped and upper-case (``load_corpus`` does it). The ``</dna>`` tag is
    the last label, never an input: nothing follows it in a window.
    """
    layout = tokenizer.layout
    dna = encode_dna(bases, layout)
    prefix = np.asarray(_tag_ids(tokenizer, tag), dtype=np.int64)
    ids = np.concatenate([prefix, [layout.begin_id], dna.ids, [layout.end_id]]).astype(np.int64)
    real = np.concatenate([np.zeros(len(prefix) + 1, np.int64), dna.n_real.astype(np.int64), [0]])
    labels = ids[1:].copy()
    valid_len = real[1:]
    is_kmer = (labels >= layout.kmer_start) & (labels < layout.kmer_start + layout.n_kmers)
    supervised = is_kmer & (valid_len > 0)
    labels[~supervised] = IGNORE_INDEX
    valid_len = np.where(supervised, valid_len, 0)
    return Example(input_ids=ids[:-1], labels=labels, valid_len=valid_len)


def collate(examples: Sequence[Example], pad_id: int) -> Batch:
    """Stack examples, right-padding inputs with ``pad_id`` and labels with ``IGNORE_INDEX``."""
    if not examples:
        raise ValueError("cannot collate an empty list of examples")
    t = max(len(e.input_ids) for e in examples)
    b = len(examples)
    ids = np.full((b, t), pad_id, dtype=np.int64)
    labels = np.full((b, t), IGNORE_INDEX, dtype=np.int64)
    valid = np.zeros((b, t), dtype=np.int64)
    for i, e in enumerate(examples):
        n = len(e.input_ids)
        ids[i, :n] = e.input_ids
        labels[i, :n] = e.labels
        valid[i, :n] = e.valid_len
    return Batch(torch.from_numpy(ids), torch.from_numpy(labels), torch.from_numpy(valid))


def batches(
    tokenizer: CarbonTokenizer, windows: Sequence[tuple[str, str]], batch_size: int, pad_id: int
) -> Iterator[Batch]:
    """Fixed-order batches of (tag, bases) windows (validation)."""
    for i in range(0, len(windows), batch_size):
        chunk = windows[i : i + batch_size]
        yield collate([build_example(tokenizer, bases, tag) for tag, bases in chunk], pad_id)


def tokens_per_window(tokenizer: CarbonTokenizer, window_bp: int, tags: Sequence[str]) -> int:
    """Input length of the longest window template (to check it fits the context)."""
    k = tokenizer.layout.k
    longest_tag = max((len(_tag_ids(tokenizer, t)) for t in tags), default=0)
    return longest_tag + 1 + -(-window_bp // k)
