"""llama.cpp as hexamer's CPU peer: GGUF conversion, a parity gate, and a batched DNA generator.

llama.cpp (through ``llama-cpp-python==0.3.36``, the ``bench`` extra) runs Carbon natively: its
vendored revision knows the ``hybriddna`` tokenizer. This module puts it on the same footing as
hexamer in ``hexamer bench``: the same folder (converted once to GGUF by llama.cpp's own
``convert_hf_to_gguf.py``), the same prompts, the same thread count, the same number of new bases,
sampling restricted to the 4,096 6-mer tokens. Nothing here is needed by hexamer itself, and every
entry point reports cleanly when llama.cpp is absent.

Stable interface (``hexamer bench`` imports it)::

    backend = LlamaCppBackend(folder, dtype="float32")   # cheap: nothing is loaded yet
    ok, why = backend.available()                         # (False, "llama-cpp-python is not installed ...")
    parity = backend.check_parity(carbon, prompts)        # ParityReport; raises ParityError beyond tolerance
    texts, timings = backend.generate(prompts, new_bp, batch=16, temperature=1.0, seed=0)
    backend.close()

    convert_to_gguf(folder, out_path=None, outtype="f32")  # -> Path (cached next to the folder)
    run_llamacpp_bench(quick=False, log=print, shape="500m", dtype="float32")  # -> BenchReport

The converter is found in ``llama_cpp_dir=``, ``$HEXAMER_LLAMA_CPP_DIR``, an unpacked sdist under the
hexamer cache (``scripts/build_llamacpp.sh`` puts one there) or a source checkout of the installed
package; the wheel itself does not ship it. See ``docs/llamacpp.md``.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib.util
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hexamer.cache import cache_root

if TYPE_CHECKING:
    from hexamer.bench.report import BenchReport
    from hexamer.carbon import Carbon

#: GGUF tensor type per hexamer dtype name (the converter's ``--outtype``).
OUTTYPES: dict[str, str] = {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}
#: llama.cpp KV-cache element types (``enum ggml_type``).
_GGML_TYPES: dict[str, int] = {"f32": 0, "f16": 1, "bf16": 30}
#: Parity tolerance per GGUF type: max |logit difference| allowed, relative to max |hexamer logit|,
#: and the least tie-aware top-1 agreement over prompt positions (6-mer rows). Random weights leave
#: near-ties that rounding may break either way, so a position also agrees when llama.cpp's argmax
#: is within that same logit tolerance of hexamer's in hexamer's logits (see :func:`top1_margins`).
TOLERANCES: dict[str, tuple[float, float]] = {"f32": (2e-3, 0.97), "f16": (3e-2, 0.85), "bf16": (6e-2, 0.8)}
_INSTALL_HINT = "pip install 'hexamer[bench]' (builds llama.cpp from source, ~10 min; see docs/llamacpp.md)"
_CONVERTER = "convert_hf_to_gguf.py"


class ParityError(RuntimeError):
    """llama.cpp and hexamer disagree on token ids or logits beyond tolerance: timings would be meaningless."""


# ---------------------------------------------------------------------------------------- setup
def llama_cpp_available() -> tuple[bool, str]:
    """Whether ``llama_cpp`` (llama-cpp-python) imports; the reason when it does not."""
    if importlib.util.find_spec("llama_cpp") is None:
        return False, f"llama-cpp-python is not installed: {_INSTALL_HINT}"
    try:
        import llama_cpp  # noqa: F401
    except Exception as exc:  # a broken build raises OSError/RuntimeError while loading libllama
        return False, f"llama-cpp-python is installed but does not load ({type(exc).__name__}: {exc})"
    return True, ""


def _converter_in(directory: Path) -> Path | None:
    for candidate in (directory, directory / "vendor" / "llama.cpp"):
        if (candidate / _CONVERTER).is_file() and (candidate / "gguf-py" / "gguf").is_dir():
            return candidate / _CONVERTER
    return None


def find_converter(llama_cpp_dir: str | os.PathLike[str] | None = None) -> Path:
    """``convert_hf_to_gguf.py`` of a llama.cpp source tree that matches the installed library.

    Looked up in ``llama_cpp_dir``, ``$HEXAMER_LLAMA_CPP_DIR``, ``<hexamer cache>/llama_cpp_python-*``
    (an unpacked sdist) and next to the imported package (source checkouts). A directory may be a
    llama.cpp checkout or an unpacked llama-cpp-python sdist (its ``vendor/llama.cpp`` is used).
    """
    tried: list[str] = []
    explicit = llama_cpp_dir or os.environ.get("HEXAMER_LLAMA_CPP_DIR")
    candidates: list[Path] = [Path(explicit)] if explicit else []
    if not explicit:
        candidates += sorted(cache_root().glob("llama_cpp_python-*"), reverse=True)
        spec = importlib.util.find_spec("llama_cpp")
        if spec is not None and spec.origin:
            candidates.append(Path(spec.origin).resolve().parent.parent)
    for directory in candidates:
        found = _converter_in(directory)
        if found is not None:
            return found
        tried.append(str(directory))
    where = f" (looked in: {', '.join(tried)})" if tried else ""
    raise FileNotFoundError(
        f"llama.cpp's {_CONVERTER} was not found{where}. The llama-cpp-python wheel does not ship it: "
        "unpack the llama-cpp-python==0.3.36 sdist (scripts/build_llamacpp.sh does) and set "
        "HEXAMER_LLAMA_CPP_DIR to it or to its vendor/llama.cpp"
    )


def default_gguf_path(folder: str | os.PathLike[str], outtype: str) -> Path:
    """Where a converted folder is cached: a sibling ``<folder>.<outtype>.gguf``."""
    folder = Path(folder).resolve()
    return folder.parent / f"{folder.name}.{outtype}.gguf"


def converter_command(
    folder: str | os.PathLike[str], out_path: str | os.PathLike[str], outtype: str, converter: Path
) -> list[str]:
    """The command that converts ``folder``: this module's ``_convert`` entry, which runs the
    converter with hexamer's tokenizer in place of the folder's remote code (see :func:`_convert_main`)."""
    if outtype not in _GGML_TYPES:
        raise ValueError(f"outtype must be one of {sorted(_GGML_TYPES)}, got {outtype!r}")
    return [
        sys.executable,
        "-m",
        "hexamer.bench.llamacpp",
        "_convert",
        str(converter),
        str(folder),
        "--outfile",
        str(out_path),
        "--outtype",
        outtype,
    ]


def _is_fresh(out: Path, folder: Path) -> bool:
    if not out.is_file():
        return False
    inputs = [p for p in folder.iterdir() if p.suffix in (".json", ".safetensors")]
    return all(p.stat().st_mtime <= out.stat().st_mtime for p in inputs)


def convert_to_gguf(
    folder: str | os.PathLike[str],
    out_path: str | os.PathLike[str] | None = None,
    outtype: str = "f32",
    *,
    llama_cpp_dir: str | os.PathLike[str] | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> Path:
    """Convert a Carbon-format folder to GGUF with llama.cpp's converter; reuse a fresh earlier result.

    Runs in a subprocess (the converter holds the whole model in memory) and writes atomically, so
    an interrupted conversion never leaves a file that later runs would take for a finished one.
    """
    folder = Path(folder).resolve()
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"not a model folder (no config.json): {folder}")
    from hexamer.model.quant import refuse_int8_folder

    refuse_int8_folder(folder, "llama.cpp's GGUF converter")
    out = Path(out_path) if out_path is not None else default_gguf_path(folder, outtype)
    if _is_fresh(out, folder):
        return out
    converter = find_converter(llama_cpp_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    log(f"converting {folder.name} to GGUF ({outtype}) with {converter} ...")
    proc = subprocess.run(
        converter_command(folder, tmp, outtype, converter), capture_output=True, text=True, check=False
    )
    if proc.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise RuntimeError(f"GGUF conversion of {folder} failed (exit {proc.returncode}):\n{tail}")
    tmp.replace(out)
    return out


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
        data = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
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
        config = Path(path) / "tokenizer_config.json"
        if config.is_file() and json.loads(config.read_text()).get("tokenizer_class") == "HybridDNATokenizer":
            return _ConverterTokenizer(Path(path))
        return original(path, *args, **kwargs)

    transformers.AutoTokenizer.from_pretrained = from_pretrained  # type: ignore[method-assign]
    warnings.simplefilter("ignore")  # the converter's hash probe text holds long digit runs, not DNA
    sys.argv = [str(converter), folder_arg, *rest]
    runpy.run_path(str(converter), run_name="__main__")
    return 0


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


@dataclass
class ParityReport:
    """How llama.cpp's tokenizer and logits compare with hexamer's on the same prompts."""

    outtype: str
    n_prompts: int
    ids_equal: int  # prompts whose token ids are identical
    positions: int  # prompt positions whose logits were compared
    max_abs_diff: float  # over the full vocabulary
    max_abs_logit: float  # hexamer's largest |logit|, the scale of the diff
    top1_agreement: float  # fraction of positions with the same argmax over the 6-mer rows (raw)
    top1_agreement_full: float  # the same over the full vocabulary
    documented: list[str] = field(default_factory=list)  # known tokenizer differences seen
    greedy_tokens: int = 0  # greedy continuation of the first prompt (exercises the KV-cache path)
    greedy_match: int = 0  # leading tokens on which both greedy continuations agree
    #: hexamer's logit margin (its top 6-mer minus llama.cpp's top 6-mer) at each position whose
    #: 6-mer argmaxes differ: how near a tie each flip was
    flip_margins: list[float] = field(default_factory=list)

    @property
    def relative_diff(self) -> float:
        return self.max_abs_diff / max(self.max_abs_logit, 1e-12)

    def tie_tolerance(self, tolerances: dict[str, tuple[float, float]] | None = None) -> float:
        """The absolute logit margin under which a flipped argmax counts as a near-tie: the logit
        discrepancy the gate accepts (relative tolerance times max |hexamer logit|)."""
        return (tolerances or TOLERANCES)[self.outtype][0] * self.max_abs_logit

    def top1_agreement_tie_aware(self, tolerances: dict[str, tuple[float, float]] | None = None) -> float:
        """Top-1 agreement (6-mer rows) counting flips within :meth:`tie_tolerance` as agreement."""
        tol = self.tie_tolerance(tolerances)
        ties = sum(1 for m in self.flip_margins if m <= tol)
        return min(1.0, self.top1_agreement + ties / max(self.positions, 1))

    def check(self, tolerances: dict[str, tuple[float, float]] | None = None) -> ParityReport:
        """Raise :class:`ParityError` when ids differ or logits disagree beyond tolerance."""
        rel_tol, top1_min = (tolerances or TOLERANCES)[self.outtype]
        problems = []
        if self.ids_equal != self.n_prompts:
            problems.append(
                f"token ids differ on {self.n_prompts - self.ids_equal} of {self.n_prompts} prompts"
            )
        if not self.relative_diff <= rel_tol:
            problems.append(
                f"max |logit diff| {self.max_abs_diff:.3g} is {self.relative_diff:.2%} of the logit scale "
                f"{self.max_abs_logit:.3g} (tolerance {rel_tol:.2%})"
            )
        agreement = self.top1_agreement_tie_aware(tolerances)
        if not agreement >= top1_min:
            problems.append(
                f"top-1 6-mer agreement {agreement:.1%} < {top1_min:.0%} counting flips within "
                f"{self.tie_tolerance(tolerances):.3g} of a tie ({self.top1_agreement:.1%} raw)"
            )
        if problems:
            raise ParityError(
                f"llama.cpp ({self.outtype} GGUF) does not reproduce hexamer: "
                + "; ".join(problems)
                + ". Refusing to time a backend that computes something else."
            )
        return self

    def summary(self) -> str:
        return (
            f"parity ({self.outtype}): ids equal on {self.ids_equal}/{self.n_prompts} prompts; "
            f"logits over {self.positions} positions: max |diff| {self.max_abs_diff:.2e} "
            f"({self.relative_diff:.2e} of max |logit| {self.max_abs_logit:.3g}), top-1 agreement "
            f"{self.top1_agreement:.1%} raw / {self.top1_agreement_tie_aware():.1%} tie-aware (flips within "
            f"{self.tie_tolerance():.2e} of a tie count as agreement) over the 6-mer rows, "
            f"{self.top1_agreement_full:.1%} raw over the full vocabulary"
            + (
                f"; greedy continuation identical for {self.greedy_match}/{self.greedy_tokens} tokens"
                if self.greedy_tokens
                else ""
            )
        )


def top1_margins(reference: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Per row of ``(T, N)`` logits, how far ``other``'s argmax is from being ``reference``'s:
    ``reference[t, ref_top] - reference[t, other_top]`` (0 where the argmaxes agree, >= 0 always).

    A row whose margin is within the logit discrepancy between the two engines is a near-tie that
    rounding may break either way; see :func:`top1_agreement`.
    """
    reference = np.asarray(reference, dtype=np.float64)
    other = np.asarray(other, dtype=np.float64)
    if reference.shape != other.shape or reference.ndim != 2:
        raise ValueError(f"logit shapes differ or are not (T, N): {reference.shape} vs {other.shape}")
    rows = np.arange(reference.shape[0])
    return reference[rows, reference.argmax(-1)] - reference[rows, other.argmax(-1)]


def top1_agreement(reference: np.ndarray, other: np.ndarray, tie_tol: float = 0.0) -> tuple[float, float]:
    """``(raw, tie_aware)`` top-1 agreement of ``(T, N)`` logits: the fraction of rows with the same
    argmax, and the fraction where ``other``'s argmax is also within ``tie_tol`` of the maximum of
    ``reference`` (:func:`top1_margins` ``<= tie_tol``).

    ``tie_tol`` must come from an independent budget (the dtype's logit tolerance): any flip's
    margin is at most the sum of the two engines' discrepancies at the two tokens involved, so a
    tolerance taken from the same row's measured difference would excuse every flip.
    """
    if tie_tol < 0:
        raise ValueError(f"tie_tol must be >= 0, got {tie_tol}")
    margins = top1_margins(reference, other)
    if not margins.size:
        return float("nan"), float("nan")  # nothing compared: fails any gate
    same = np.asarray(reference).argmax(-1) == np.asarray(other).argmax(-1)
    return float(np.mean(same)), float(np.mean(same | (margins <= tie_tol)))


def compare_logits(reference: np.ndarray, other: np.ndarray, kmer_rows: tuple[int, int]) -> dict[str, Any]:
    """Max |diff|, the reference scale, top-1 agreement (6-mer rows and full rows) of (T, V) logits,
    and the reference margin of each 6-mer argmax flip (``flip_margins``, see :func:`top1_margins`)."""
    reference = np.asarray(reference, dtype=np.float64)
    other = np.asarray(other, dtype=np.float64)
    if reference.shape != other.shape:
        raise ValueError(f"logit shapes differ: {reference.shape} vs {other.shape}")
    start, stop = kmer_rows
    kref, kother = reference[:, start:stop], other[:, start:stop]
    flipped = kref.argmax(-1) != kother.argmax(-1)
    return {
        "max_abs_diff": float(np.max(np.abs(reference - other))) if reference.size else 0.0,
        "max_abs_logit": float(np.max(np.abs(reference))) if reference.size else 0.0,
        "top1": top1_agreement(kref, kother)[0],
        "top1_full": top1_agreement(reference, other)[0],
        "flip_margins": [float(m) for m in top1_margins(kref, kother)[flipped]],
    }


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

    def prompt_logits(self, ids: Sequence[int]) -> np.ndarray:
        """Full-vocabulary float32 logits ``(T, V)`` at every position of one prompt."""
        import llama_cpp as lc

        self.load()
        ctx, batch, _ = self._context(1, len(ids) + 1, len(ids))
        lc.llama_memory_clear(lc.llama_get_memory(ctx), True)
        self._decode(ctx, batch, [(t, p, 0, True) for p, t in enumerate(ids)])
        return self._rows(ctx, range(len(ids)), 0, self._layout.vocab_size)

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


# ---------------------------------------------------------------------------------------- bench
def _timed_steps(carbon: Carbon) -> list[float]:
    """Record the wall time of every engine step of ``carbon`` (the first one holds the prefill)."""
    engine = carbon.engine
    times: list[float] = []
    step = type(engine).step

    def timed() -> Any:
        t0 = time.perf_counter()
        out = step(engine)
        times.append(time.perf_counter() - t0)
        return out

    engine.step = timed  # type: ignore[method-assign]
    return times


def run_llamacpp_bench(
    *,
    quick: bool = False,
    log: Callable[[str], None] = print,
    shape: str | None = None,
    dtype: str = "float32",
    batch_sizes: tuple[int, ...] = (1, 16),
    prompt_bp: int = 1080,
    new_bp: int = 1080,
    repeats: int = 1,
    threads: int | None = None,
    hexamer_modes: tuple[str, ...] = ("token",),
    folder: str | os.PathLike[str] | None = None,
    llama_cpp_dir: str | os.PathLike[str] | None = None,
) -> BenchReport:
    """hexamer vs llama.cpp generation bp/s on the same weights and threads, after a parity gate.

    The folder is ``bench_model_folder(shape)`` (random weights, real vocabulary; default shape
    ``tiny`` with ``quick``, else ``500m``) unless given.
    ``threads`` (default: torch's current setting) is used by both. ``hexamer_modes`` adds
    ``"bp"`` (FNS base-level sampling) to the like-for-like token-level run. ``quick`` shrinks the
    workload (batch <= 4, 120 bp in / 60 bp out) to check the plumbing. Backends alternate within
    each of ``repeats`` rounds and keep their best time. Raises :class:`ParityError` before any
    timing when llama.cpp computes something else.
    """
    import torch

    from hexamer.bench.generate import bench_model_folder
    from hexamer.bench.report import BenchReport
    from hexamer.bench.tokenizer import random_dna
    from hexamer.carbon import Carbon

    bad = [m for m in hexamer_modes if m not in ("token", "bp")]
    if bad or not hexamer_modes:
        raise ValueError(f"hexamer_modes must be a non-empty subset of token, bp; got {hexamer_modes}")
    shape = shape or ("tiny" if quick else "500m")
    if quick:
        batch_sizes = tuple(min(b, 4) for b in batch_sizes)
        prompt_bp, new_bp = min(prompt_bp, 120), min(new_bp, 60)
    torch_threads = torch.get_num_threads()
    threads = threads or torch_threads
    torch.set_num_threads(threads)
    backend = LlamaCppBackend(
        folder or bench_model_folder(shape, cache_root(), dtype),
        dtype=dtype,
        n_threads=threads,
        llama_cpp_dir=llama_cpp_dir,
        log=log,
    )
    try:
        ok, why = backend.available()
        if not ok:
            raise RuntimeError(f"llama.cpp benchmark unavailable: {why}")
        carbon = Carbon.from_pretrained(
            backend.folder, dtype=getattr(torch, dtype), device="cpu", max_batch_size=max(batch_sizes)
        )
        step_times = _timed_steps(carbon)
        k = carbon.layout.k
        prompt_bp -= prompt_bp % k
        prompts_all = [random_dna(prompt_bp, seed=1000 + i) for i in range(max(batch_sizes))]
        backend.load()
        parity = backend.check_parity(carbon, prompts_all, raise_on_failure=False)
        log(parity.summary())
        parity.check()

        report = BenchReport(
            name="llamacpp",
            title=f"hexamer vs llama.cpp generation ({Path(backend.folder).name}, {dtype}, "
            f"{prompt_bp} bp in / {new_bp} bp out, {threads} threads each)",
            columns=["backend", "batch", "seconds", "bp/s", "× llama.cpp", "prefill s", "median step ms"],
            formats={
                "seconds": "{:.2f}",
                "bp/s": "{:,.1f}",
                "× llama.cpp": "{:.2f}×",
                "prefill s": "{:.2f}",
                "median step ms": "{:.1f}",
            },
        )
        for batch in batch_sizes:
            prompts = prompts_all[:batch]
            best: dict[str, tuple[float, float, float]] = {}  # name -> (seconds, prefill, median step)

            def run_hexamer(mode: str, items: list[str], bp: int) -> tuple[float, float]:
                step_times.clear()
                carbon.generate(items, max_bp=bp, mode=mode, temperature=1.0, seed=0)
                decode = step_times[1:] or step_times
                return step_times[0], float(np.median(decode))

            def run_llama(items: list[str], bp: int, b: int) -> tuple[float, float]:
                _, t = backend.generate(items, bp, batch=b, temperature=1.0, seed=0)
                return t.prefill_s, float(np.median(t.step_s)) if t.step_s else 0.0

            cases: dict[str, Callable[[], tuple[float, float]]] = {
                f"hexamer {mode} level": (lambda m=mode, p=prompts: run_hexamer(m, p, new_bp))
                for mode in hexamer_modes
            }
            cases["llama.cpp"] = lambda p=prompts, b=batch: run_llama(p, new_bp, b)
            run_hexamer("token", prompts[:1], 12)  # warm-up: allocations, oneDNN packing, KV contexts
            run_llama(prompts, 12, batch)
            for round_ in range(repeats):
                for name, fn in cases.items():
                    gc.collect()
                    t0 = time.perf_counter()
                    prefill, step = fn()
                    seconds = time.perf_counter() - t0
                    if seconds < best.get(name, (float("inf"),))[0]:
                        best[name] = (seconds, prefill, step)
                    log(
                        f"batch {batch}: {name} {batch * new_bp / seconds:,.1f} bp/s, prefill {prefill:.2f} s, "
                        f"median step {1000 * step:.1f} ms (round {round_ + 1}/{repeats})"
                    )
            peer = best["llama.cpp"][0]
            for name, (seconds, prefill, step) in best.items():
                report.rows.append(
                    {
                        "backend": name,
                        "batch": batch,
                        "seconds": seconds,
                        "bp/s": batch * new_bp / seconds,
                        "× llama.cpp": peer / seconds,
                        "prefill s": prefill,
                        "median step ms": 1000 * step,
                    }
                )
        report.notes.append(parity.summary())
        report.notes += parity.documented
        report.notes.append(
            f"same folder and dtype ({backend.outtype} GGUF from llama.cpp's converter), same prompts, "
            f"{threads} threads each, temperature 1 over the 4,096 6-mers, end to end "
            f"(tokenize + prefill + decode); best of {repeats} alternating rounds"
        )
        return report
    finally:
        backend.close()
        torch.set_num_threads(torch_threads)


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "_convert":
        sys.exit(_convert_main(sys.argv[2:]))
    sys.exit("usage: python -m hexamer.bench.llamacpp _convert CONVERTER FOLDER [--outfile F --outtype T]")
