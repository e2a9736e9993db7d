"""llama.cpp generating DNA from a Carbon folder through llama-cpp-python's C API, and its parity check."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hexamer.bench.llamacpp.convert import (
    _GGML_TYPES,
    OUTTYPES,
    _is_fresh,
    convert_to_gguf,
    default_gguf_path,
    find_converter,
    llama_cpp_available,
)
from hexamer.bench.llamacpp.parity import ParityReport, compare_logits

if TYPE_CHECKING:
    from hexamer.carbon import Carbon


# ---------------------------------------------------------------------------------------- results
@dataclass
class GenerationTimings:
    """Wall-clock split of one :meth:`LlamaCppBackend.generate` call (all groups summed)."""

    tokenize_s: float = 0.0
    prefill_s: float = 0.0  # prompt forward + the first sampled token
    step_s: list[float] = field(default_factory=list)  # one entry per batched decode step
    sample_s: float = 0.0  # restricting to the 6-mer rows and sampling (numpy), all steps
    total_s: float = 0.0
    n_sequences: int = 0
    new_tokens: int = 0  # per sequence

    @property
    def mean_step_s(self) -> float:
        return float(np.mean(self.step_s)) if self.step_s else 0.0


def sample_rows(logits: np.ndarray, temperature: float, rngs: Sequence[np.random.Generator]) -> np.ndarray:
    """One index per row of ``(B, N)`` logits: softmax at ``temperature`` (argmax at 0), row i drawn
    with ``rngs[i]`` (so a sequence's draws do not depend on its batch neighbours)."""
    logits = np.asarray(logits, dtype=np.float64)
    if temperature <= 0:
        return logits.argmax(-1)
    z = logits / temperature
    p = np.exp(z - z.max(-1, keepdims=True))
    cdf = np.cumsum(p, -1)
    u = np.array([rng.random() for rng in rngs]) * cdf[:, -1]
    return np.minimum((cdf < u[:, None]).sum(-1), logits.shape[1] - 1)


# ---------------------------------------------------------------------------------------- backend
class LlamaCppBackend:
    """llama.cpp generating DNA from a Carbon folder, batch 1 or many sequences per step.

    Batched runs put every sequence in one ``llama_batch`` (one seq id each, ``n_seq_max`` = batch,
    a separate KV stream per sequence), so each decode step is one ``llama_decode`` over B tokens —
    what llama.cpp's own ``llama-batched`` example and ``llama-server`` slots do. The 6-mer
    restriction reads the 4,096 6-mer logits straight from llama.cpp's output buffer and samples in
    numpy (a logit-bias list would touch all 155,776 entries per token, a grammar more). KV cache,
    flash attention and ubatch size are llama.cpp's defaults unless given.
    """

    name = "llama.cpp"

    def __init__(
        self,
        folder: str | os.PathLike[str],
        *,
        dtype: str = "float32",
        gguf_path: str | os.PathLike[str] | None = None,
        n_threads: int | None = None,
        kv_type: str | None = None,
        llama_cpp_dir: str | os.PathLike[str] | None = None,
        log: Callable[[str], None] = lambda _: None,
    ) -> None:
        if dtype not in OUTTYPES:
            raise ValueError(f"dtype must be one of {sorted(OUTTYPES)}, got {dtype!r}")
        if kv_type is not None and kv_type not in _GGML_TYPES:
            raise ValueError(f"kv_type must be one of {sorted(_GGML_TYPES)}, got {kv_type!r}")
        self.folder = Path(folder)
        self.dtype = dtype
        self.outtype = OUTTYPES[dtype]
        self.gguf_path = Path(gguf_path) if gguf_path is not None else None
        self.n_threads = n_threads
        self.kv_type = kv_type
        self.llama_cpp_dir = llama_cpp_dir
        self.log = log
        self._model: Any = None
        self._vocab: Any = None
        self._contexts: dict[tuple[int, int], Any] = {}
        self._layout: Any = None

    # -------------------------------------------------------------- lifecycle
    def available(self) -> tuple[bool, str]:
        """(True, "") when llama.cpp loads and a GGUF exists or can be converted; else the reason."""
        ok, why = llama_cpp_available()
        if not ok:
            return ok, why
        if self.gguf_path is not None and self.gguf_path.is_file():
            return True, ""
        if _is_fresh(default_gguf_path(self.folder, self.outtype), self.folder.resolve()):
            return True, ""
        try:
            find_converter(self.llama_cpp_dir)
        except FileNotFoundError as exc:
            return False, str(exc)
        return True, ""

    def load(self) -> LlamaCppBackend:
        """Convert (cached) and load the model; called by the first :meth:`generate`."""
        if self._model is not None:
            return self
        ok, why = llama_cpp_available()
        if not ok:
            raise RuntimeError(why)
        import llama_cpp as lc

        from hexamer.tokenizer import CarbonTokenizer

        logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)  # llama.cpp logs every tensor
        if self.gguf_path is None:
            self.gguf_path = convert_to_gguf(
                self.folder, outtype=self.outtype, llama_cpp_dir=self.llama_cpp_dir, log=self.log
            )
        self._layout = CarbonTokenizer.from_pretrained(self.folder).layout
        lc.llama_backend_init()
        params = lc.llama_model_default_params()
        params.use_mmap = False  # weights in RAM up front, like hexamer's loaded tensors
        model = lc.llama_model_load_from_file(str(self.gguf_path).encode(), params)
        if not model:
            raise RuntimeError(f"llama.cpp could not load {self.gguf_path}")
        self._model = model
        self._vocab = lc.llama_model_get_vocab(model)
        n_vocab = lc.llama_vocab_n_tokens(self._vocab)
        if n_vocab != self._layout.vocab_size:
            raise RuntimeError(f"GGUF vocabulary {n_vocab} != folder vocabulary {self._layout.vocab_size}")
        return self

    def close(self) -> None:
        if self._model is None:
            return
        import llama_cpp as lc

        for ctx, batch, _ in self._contexts.values():
            lc.llama_batch_free(batch)
            lc.llama_free(ctx)
        self._contexts.clear()
        lc.llama_model_free(self._model)
        self._model = None

    def __del__(self) -> None:  # contexts hold hundreds of MB of KV cache
        with contextlib.suppress(Exception):
            self.close()

    @property
    def threads(self) -> int:
        """Threads for llama.cpp: the given number, else torch's (what hexamer runs with)."""
        if self.n_threads:
            return self.n_threads
        import torch

        return torch.get_num_threads()

    def _context(self, n_seq: int, n_ctx_seq: int, n_batch: int) -> tuple[Any, Any, int]:
        """A context with ``n_seq`` KV streams of ``n_ctx_seq`` tokens each (reused across calls)."""
        import llama_cpp as lc

        n_ctx_seq = -(-n_ctx_seq // 256) * 256
        key = (n_seq, n_ctx_seq)
        for (seqs, per), value in self._contexts.items():
            if seqs == n_seq and per >= n_ctx_seq and value[2] >= n_batch:
                return value
        params = lc.llama_context_default_params()
        params.n_ctx = n_seq * n_ctx_seq
        params.n_batch = max(n_batch, params.n_batch)
        params.n_seq_max = n_seq
        params.kv_unified = False  # one stream per sequence: attention reads only its own keys
        params.n_threads = params.n_threads_batch = self.threads
        params.no_perf = True
        if self.kv_type is not None:
            params.type_k = params.type_v = _GGML_TYPES[self.kv_type]
        ctx = lc.llama_init_from_model(self._model, params)
        if not ctx:
            raise RuntimeError(f"llama.cpp could not create a context for {n_seq} × {n_ctx_seq} tokens")
        batch = lc.llama_batch_init(params.n_batch, 0, n_seq)
        self._contexts[key] = (ctx, batch, params.n_batch)
        return self._contexts[key]

    # -------------------------------------------------------------- tokenizer
    def tokenize(self, text: str) -> list[int]:
        """llama.cpp's ids for ``text`` (no BOS; ``<dna>`` handled by its hybriddna tokenizer)."""
        import llama_cpp as lc

        self.load()
        raw = text.encode("utf-8")
        buf = (lc.llama_token * (len(raw) + 8))()
        # parse_special=False: with True, llama.cpp cuts <dna> out as a control token first and the
        # DNA after it reaches the BPE instead of the 6-mer splitter
        n = lc.llama_tokenize(self._vocab, raw, len(raw), buf, len(buf), False, False)
        if n < 0:
            raise RuntimeError(f"llama.cpp tokenizer needs {-n} tokens for a {len(raw)}-byte text")
        return list(buf[:n])

    def detokenize(self, ids: Sequence[int]) -> str:
        import llama_cpp as lc

        self.load()
        arr = (lc.llama_token * max(1, len(ids)))(*ids)
        size = 8 * len(ids) + 16
        out = ctypes.create_string_buffer(size)
        n = lc.llama_detokenize(self._vocab, arr, len(ids), out, size, False, False)
        if n < 0:
            raise RuntimeError(f"llama.cpp detokenize needs {-n} bytes")
        return out.raw[:n].decode("utf-8")

    # -------------------------------------------------------------- forward
    def _decode(self, ctx: Any, batch: Any, rows: Sequence[tuple[int, int, int, bool]]) -> None:
        """One ``llama_decode`` of ``(token, position, seq id, want logits)`` rows."""
        import llama_cpp as lc

        for i, (token, pos, seq, want) in enumerate(rows):
            batch.token[i] = token
            batch.pos[i] = pos
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = seq
            batch.logits[i] = want
        batch.n_tokens = len(rows)
        rc = lc.llama_decode(ctx, batch)
        if rc != 0:
            raise RuntimeError(f"llama_decode failed with code {rc} on a batch of {len(rows)} tokens")

    def _rows(self, ctx: Any, batch_index: Sequence[int], start: int, stop: int) -> np.ndarray:
        """Vocabulary rows [start, stop) of the last decode's logits at the given batch positions."""
        import llama_cpp as lc

        n_vocab = self._layout.vocab_size
        out = np.empty((len(batch_index), stop - start), dtype=np.float32)
        for row, i in enumerate(batch_index):
            ptr = lc.llama_get_logits_ith(ctx, i)
            if not ptr:
                raise RuntimeError(f"llama.cpp returned no logits for batch position {i}")
            out[row] = np.ctypeslib.as_array(ptr, shape=(n_vocab,))[start:stop]
        return out

    def prompt_logits(self, ids: Sequence[int], vocab_rows: tuple[int, int] | None = None) -> np.ndarray:
        """float32 logits ``(T, V)`` at every position of one prompt: the full vocabulary, or its
        rows ``[start, stop)`` (``vocab_rows``, e.g. the 4,096 6-mers for scoring)."""
        import llama_cpp as lc

        self.load()
        ctx, batch, _ = self._context(1, len(ids) + 1, len(ids))
        lc.llama_memory_clear(lc.llama_get_memory(ctx), True)
        self._decode(ctx, batch, [(t, p, 0, True) for p, t in enumerate(ids)])
        start, stop = vocab_rows if vocab_rows is not None else (0, self._layout.vocab_size)
        return self._rows(ctx, range(len(ids)), start, stop)

    @property
    def layout(self) -> Any:
        """The folder's :class:`~hexamer.tokenizer.DnaLayout` (loads the backend)."""
        self.load()
        return self._layout

    def generate(
        self,
        prompts: Sequence[str],
        new_bp: int,
        *,
        batch: int = 1,
        temperature: float = 1.0,
        seed: int = 0,
    ) -> tuple[list[str], GenerationTimings]:
        """Continue each DNA prompt by ``new_bp`` bases (6-mer tokens only), ``batch`` sequences per step.

        Prompts are plain DNA of whole 6-mers (llama.cpp would pad a partial 6-mer with A, changing
        the prompt); prompt i samples with seed ``seed + i``. Returns the new bases per prompt and
        where the time went (tokenization, prefill, each decode step, sampling).
        """
        import llama_cpp as lc

        if batch < 1:
            raise ValueError(f"batch must be >= 1, got {batch}")
        if new_bp < 1:
            raise ValueError(f"new_bp must be >= 1, got {new_bp}")
        self.load()
        layout = self._layout
        k = layout.k
        for i, p in enumerate(prompts):
            if not isinstance(p, str) or not p or len(p) % k:
                raise ValueError(f"prompt {i}: llama.cpp prompts must be non-empty DNA of whole {k}-mers")
        new_tokens = -(-new_bp // k)
        timings = GenerationTimings(n_sequences=len(prompts), new_tokens=new_tokens)
        outputs: list[str] = []
        start_all = time.perf_counter()
        for g in range(0, len(prompts), batch):
            group = list(prompts[g : g + batch])
            t0 = time.perf_counter()
            ids = [self.tokenize(f"<dna>{p}") for p in group]
            timings.tokenize_s += time.perf_counter() - t0
            t0 = time.perf_counter()
            longest = max(map(len, ids))
            ctx, cbatch, n_batch = self._context(
                batch, longest + new_tokens + 1, max(longest * len(group), batch)
            )
            lc.llama_memory_clear(lc.llama_get_memory(ctx), True)
            rows = [
                (t, pos, s, pos == len(seq) - 1) for s, seq in enumerate(ids) for pos, t in enumerate(seq)
            ]
            first = np.empty((len(group), layout.n_kmers), dtype=np.float32)
            for c in range(0, len(rows), n_batch):  # more prompt tokens than n_batch go in chunks
                chunk = rows[c : c + n_batch]
                self._decode(ctx, cbatch, chunk)
                last = [j for j, row in enumerate(chunk) if row[3]]  # read before the next chunk overwrites
                if last:
                    first[[chunk[j][2] for j in last]] = self._rows(
                        ctx, last, layout.kmer_start, layout.kmer_stop
                    )
            rngs = [np.random.default_rng(seed + g + i) for i in range(len(group))]
            ts = time.perf_counter()
            picked = sample_rows(first, temperature, rngs)
            timings.sample_s += time.perf_counter() - ts
            out = [[int(x)] for x in picked]
            timings.prefill_s += time.perf_counter() - t0
            for step in range(1, new_tokens):
                t0 = time.perf_counter()
                self._decode(
                    ctx,
                    cbatch,
                    [
                        (layout.kmer_start + out[s][-1], len(ids[s]) + step - 1, s, True)
                        for s in range(len(group))
                    ],
                )
                ts = time.perf_counter()
                logits = self._rows(ctx, range(len(group)), layout.kmer_start, layout.kmer_stop)
                for s, x in enumerate(sample_rows(logits, temperature, rngs)):
                    out[s].append(int(x))
                now = time.perf_counter()
                timings.sample_s += now - ts
                timings.step_s.append(now - t0)
            for kmers in out:
                outputs.append(self.detokenize([layout.kmer_start + x for x in kmers])[:new_bp])
        timings.total_s = time.perf_counter() - start_all
        return outputs, timings

    # -------------------------------------------------------------- parity
    def check_parity(
        self,
        carbon: Carbon,
        prompts: Sequence[str],
        *,
        logit_prompts: int = 1,
        greedy_tokens: int = 16,
        raise_on_failure: bool = True,
    ) -> ParityReport:
        """Compare token ids on ``prompts`` (plus documented edge cases) and full-vocabulary logits
        on the first ``logit_prompts`` of them with ``carbon``'s model; raise :class:`ParityError`
        beyond :data:`TOLERANCES` unless ``raise_on_failure`` is False.

        Also reports (without gating: random weights leave near-ties that either side may break)
        how many leading tokens of a greedy continuation of the first prompt agree."""
        import torch

        self.load()
        tok = carbon.tokenizer
        equal = 0
        for p in prompts:
            equal += int(tok.encode(f"<dna>{p}") == self.tokenize(f"<dna>{p}"))
        documented = []
        edge = "ACGTAC" * 3
        if tok.encode(f"<dna> {edge} </dna>") != self.tokenize(f"<dna> {edge} </dna>"):
            documented.append(
                "whitespace at the ends of DNA: hexamer strips it (official tokenizer), llama.cpp does not"
            )
        if tok.encode(f"<dna>{edge.lower()}NNACGT") != self.tokenize(f"<dna>{edge.lower()}NNACGT"):
            documented.append(
                "lower case / <oov> chunks differ (unexpected: both fold case and map non-ACGT to <oov>)"
            )
        stats = []
        for p in list(prompts)[:logit_prompts]:
            ids = tok.encode(f"<dna>{p}")
            with torch.inference_mode():
                ref = carbon.model(torch.tensor([ids], device=carbon.model.device), logits_at="all").logits[0]
            stats.append(
                compare_logits(
                    ref.float().cpu().numpy(),
                    self.prompt_logits(ids),
                    (self._layout.kmer_start, self._layout.kmer_stop),
                )
                | {"n": len(ids)}
            )
        n = sum(s["n"] for s in stats)
        match = 0
        if greedy_tokens and prompts:
            ours = carbon.generate(prompts[0], max_new_tokens=greedy_tokens, mode="token", temperature=0.0)
            theirs, _ = self.generate([prompts[0]], greedy_tokens * self._layout.k, temperature=0.0)
            for a, b in zip(
                _chunks(ours.sequence, self._layout.k), _chunks(theirs[0], self._layout.k), strict=False
            ):
                if a != b:
                    break
                match += 1
        report = ParityReport(
            outtype=self.outtype,
            n_prompts=len(prompts),
            ids_equal=equal,
            positions=n,
            max_abs_diff=max((s["max_abs_diff"] for s in stats), default=0.0),
            max_abs_logit=max((s["max_abs_logit"] for s in stats), default=0.0),
            top1_agreement=sum(s["top1"] * s["n"] for s in stats) / max(n, 1),
            top1_agreement_full=sum(s["top1_full"] * s["n"] for s in stats) / max(n, 1),
            documented=documented,
            greedy_tokens=greedy_tokens if prompts else 0,
            greedy_match=match,
            flip_margins=[m for s in stats for m in s["flip_margins"]],
        )
        return report.check() if raise_on_failure else report


def _chunks(text: str, k: int) -> list[str]:
    return [text[i : i + k] for i in range(0, len(text), k)]
