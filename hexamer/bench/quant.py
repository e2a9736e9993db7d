"""``hexamer bench quant``: what int8 weights buy (speed) and cost (fidelity) against float32 and
bfloat16, every variant loaded from the same folder into the same process.

Speed: decode step (median inter-token latency of a generation) and prefill (time to first token)
at each batch size, the variants taking turns round by round (so a slow spell of a shared machine
hits them all), best round kept; ratios are against float32 of the same run. llama.cpp rows are
added when llama-cpp-python is installed: a Q8_0 GGUF given (``--gguf``), or the folder quantized
by llama.cpp's own quantizer to each type asked for (``--gguf-quantize q8_0,q4_k_m,q4_0``,
:func:`peer_ggufs`), each row taking its turn in every round; else a ``skipped`` row says why.

Fidelity: against the float32 model, on real DNA windows (the held-out tail of every sequence in
``hexamer/data/dna``, which the demo model never trained on):

* variant scores of random SNVs, window recipe ``LL(alt window) - LL(ref window)`` at bp level:
  per-variant ``|Δscore|`` (median, p99, max) and Spearman of the scores vs float32;
* a labelled task with a known answer: real windows (label 1) vs the same windows with 10% of the
  bases substituted (label 0), scored by mean bp log-likelihood: AUROC per variant and ΔAUROC vs
  float32 (synthetic labels, not clinical ones);
* bp-level log-likelihood drift: mean and max ``|Δ log P(base)|`` over every scored base, and the
  change of the mean per-base log-likelihood.

llama.cpp's own quantizations of the same weights (``--gguf-quantize q8_0,q4_k_m,q4_0`` or
``--gguf FILE``) are scored as more rows: its logits of the 6-mer rows on the same token ids, through hexamer's FNS
scoring (:mod:`hexamer.bench.llamacpp.scoring`); a ``skipped`` row with the reason when
llama-cpp-python is not installed or no GGUF is given.
"""

from __future__ import annotations

import gzip
import random
import statistics
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hexamer.bench.report import BenchReport

if TYPE_CHECKING:
    from hexamer.carbon import Carbon

#: The variants compared, as ``Carbon.from_pretrained`` dtype names (float32 first: the reference).
VARIANTS = ("float32", "bfloat16", "int8", "int8-bf16", "int8-a8", "int4", "int4-bf16")
DNA_DIR = Path(__file__).resolve().parents[1] / "data" / "dna"
HELD_OUT = 0.10  # the demo model never saw the last 10% of each sequence
LLAMA_CPP_NAME = "llama.cpp Q8_0"


def llama_cpp_name(qtype: str | None) -> str:
    """The llama.cpp row's name: its GGUF type when hexamer made the file (``q4_k_m`` ->
    ``llama.cpp Q4_K_M``), else the Q8_0 name that ``--gguf FILE`` promises."""
    return f"llama.cpp {qtype.upper()}" if qtype else LLAMA_CPP_NAME


LLAMA_CPP_HINT = (
    "llama-cpp-python is not installed (scripts/build_llamacpp.sh or pip install 'hexamer[bench]', "
    "~15 min build; then pass --gguf-quantize q8_0)"
)


def check_variants(variants: Sequence[str]) -> tuple[str, ...]:
    """The variants in order, float32 first (added when missing: every ratio is against it)."""
    bad = [v for v in variants if v not in VARIANTS]
    if bad:
        raise ValueError(f"unknown variant(s) {bad}; choose from {list(VARIANTS)}")
    return ("float32", *[v for v in dict.fromkeys(variants) if v != "float32"])


def load_variants(
    folder: str | Path, variants: Sequence[str], max_batch_size: int, log: Callable[[str], None]
) -> dict[str, Carbon]:
    """One CPU ``Carbon`` per variant, all from ``folder`` (int8 ones quantized while loading).
    Prefix caching is off: the speed rounds repeat the same prompts, whose prefill it would skip."""
    from hexamer import Carbon

    carbons = {}
    for v in variants:
        log(f"loading {Path(folder).name} as {v} ...")
        carbons[v] = Carbon.from_pretrained(
            folder, dtype=v, device="cpu", max_batch_size=max_batch_size, prefix_caching=False
        )
    return carbons


# ------------------------------------------------------------------------------------- speed
def run_quant_speed(
    carbons: dict[str, Carbon],
    *,
    batch_sizes: Sequence[int] = (1, 16),
    prompt_bp: int = 1080,
    new_bp: int = 360,
    rounds: int = 3,
    ggufs: Mapping[str, str | Path | None] | None = None,
    folder: str | Path | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> BenchReport:
    """Decode step and prefill per variant and batch size, alternating rounds; best round kept.
    ``ggufs`` maps llama.cpp GGUF types (``q8_0``, ``q4_k_m``, ``q4_0``: the rows' names) to the
    files timed, each one more row taking its turn in every round (None: a ``skipped`` row with
    the reason); default one skipped Q8_0 row."""
    from hexamer.bench.backends import HexamerBackend
    from hexamer.bench.suite import suite_prompts

    k = next(iter(carbons.values())).layout.k
    backends: dict[str, Any] = {v: HexamerBackend(c, "token") for v, c in carbons.items()}
    skipped: dict[str, str] = {}
    for qtype, gguf in (ggufs or {"q8_0": None}).items():
        peer, why = llama_cpp_peer(gguf, folder)
        if peer is None:
            skipped[llama_cpp_name(qtype)] = str(why)
        else:
            backends[llama_cpp_name(qtype)] = peer
    prompts = {b: [p.sequence for p in suite_prompts(b, prompt_bp - prompt_bp % k)] for b in batch_sizes}
    for v, backend in backends.items():  # warm-up: first-call packing, native build, allocator
        log(f"warm-up {v} ...")
        backend.generate(prompts[min(batch_sizes)][:1], 2 * k)
    step: dict[tuple[str, int], list[float]] = {}
    prefill: dict[tuple[str, int], list[float]] = {}
    for r in range(rounds):
        for b in batch_sizes:
            for v, backend in backends.items():
                log(f"round {r + 1}/{rounds}: {v} batch {b} ...")
                run = backend.generate(prompts[b], new_bp)
                if run.itl_s:
                    step.setdefault((v, b), []).append(statistics.median(run.itl_s))
                if run.ttft_s is not None:
                    prefill.setdefault((v, b), []).append(run.ttft_s)
    report = BenchReport(
        name="quant",
        title=f"int8 vs float: decode step and prefill (best of {rounds} alternating rounds)",
        columns=("variant", "batch", "status", "decode step ms", "× float32", "× bfloat16", "prefill s", "prefill × float32"),
        formats={"decode step ms": "{:.1f}", "× float32": "{:.2f}×", "× bfloat16": "{:.2f}×", "prefill s": "{:.2f}", "prefill × float32": "{:.2f}×"},
    )  # fmt: skip
    for b in batch_sizes:
        base = min(step.get(("float32", b), [float("nan")]))
        base_pf = min(prefill.get(("float32", b), [float("nan")]))
        bf16 = min(step.get(("bfloat16", b), [float("nan")]))
        for v in backends:
            s, p = min(step.get((v, b), [float("nan")])), min(prefill.get((v, b), [float("nan")]))
            ok = np.isfinite(s) and np.isfinite(p)
            report.rows.append(
                {
                    "variant": v,
                    "batch": b,
                    "status": "ok" if ok else "no timing",
                    "decode step ms": 1000 * s if ok else None,
                    "× float32": base / s if ok else None,  # speed-up: > 1 is faster
                    "× bfloat16": bf16 / s if ok and np.isfinite(bf16) else None,
                    "prefill s": p if ok else None,
                    "prefill × float32": base_pf / p if ok else None,
                    "rounds_decode_s": step.get((v, b), []),
                    "rounds_prefill_s": prefill.get((v, b), []),
                    "threads": _threads(),
                }
            )
    for peer_name, why in skipped.items():
        report.rows.extend(
            {"variant": peer_name, "batch": b, "status": "skipped", "reason": why} for b in batch_sizes
        )
        report.notes.append(f"{peer_name}: skipped ({why})")
    for qtype, gguf in (ggufs or {}).items():
        if llama_cpp_name(qtype) in backends:
            report.notes.append(
                f"{llama_cpp_name(qtype)}: {gguf}, same threads; its outputs are not checked against "
                "hexamer's (llama.cpp quantizes differently), only timed"
            )
    report.notes.append(
        f"prompts of {prompt_bp} bp, {new_bp} bp generated (token level); decode step = median "
        "inter-token latency of a run; × columns are speed-ups (baseline time / variant time) "
        "within this run. On a shared machine only the ratios are comparable across runs."
    )
    return report


def _threads() -> int:
    import torch

    return torch.get_num_threads()


class _LlamaCppTimer:
    """llama.cpp's batched generation with the interface of ``HexamerBackend.generate``
    (``itl_s``: its decode steps; ``ttft_s``: its prefill)."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend

    def generate(self, prompts: Sequence[str], new_bp: int) -> Any:
        from types import SimpleNamespace

        _, timings = self.backend.generate(list(prompts), new_bp, batch=len(prompts))
        return SimpleNamespace(itl_s=list(timings.step_s), ttft_s=timings.prefill_s)


def check_peer_gguf(gguf: str | Path | None, gguf_quantize: Sequence[str] | None) -> None:
    """``ValueError`` unless at most one of an existing GGUF file and known quantization types is given."""
    from hexamer.bench.llamacpp import check_quant_type

    if gguf is not None and not Path(gguf).is_file():
        raise ValueError(f"GGUF file not found: {gguf}")
    if gguf_quantize:
        if gguf is not None:
            raise ValueError("give either a GGUF file or types to quantize the folder to, not both")
        for qtype in gguf_quantize:
            check_quant_type(qtype)


def peer_ggufs(
    folder: str | Path,
    gguf: str | Path | None,
    gguf_quantize: Sequence[str] | None,
    *,
    n_threads: int = 0,
    log: Callable[[str], None] = lambda _: None,
) -> dict[str, Path | None]:
    """The GGUFs the llama.cpp rows use, by type: ``gguf`` as given (a Q8_0 row), or for each type
    of ``gguf_quantize`` (``["q8_0", "q4_k_m"]``) ``folder`` converted and quantized by llama.cpp
    itself (cached beside it). A type maps to None when llama.cpp is not installed (its row is then
    skipped with the reason, not an error); nothing given: ``{"q8_0": None}``."""
    from hexamer.bench.llamacpp import llama_cpp_available, quantized_gguf

    check_peer_gguf(gguf, gguf_quantize)
    if not gguf_quantize:
        return {"q8_0": Path(gguf) if gguf is not None else None}
    if not llama_cpp_available()[0]:
        return dict.fromkeys(gguf_quantize)
    return {q: quantized_gguf(folder, q, n_threads=n_threads, log=log) for q in dict.fromkeys(gguf_quantize)}


def _llama_cpp_backend(gguf: str | Path | None, folder: str | Path | None) -> tuple[Any, str | None]:
    """(llama.cpp's backend on the GGUF ``gguf``, None), or (None, why the row is skipped)."""
    from hexamer.bench.llamacpp import LlamaCppBackend, llama_cpp_available

    ok, why = llama_cpp_available()
    if not ok:
        return None, LLAMA_CPP_HINT if "not installed" in why else why
    if gguf is None or not Path(gguf).is_file() or folder is None:
        return None, (
            "no GGUF given: pass --gguf-quantize q8_0 (or q8_0,q4_k_m,q4_0: hexamer converts the folder "
            "and llama.cpp quantizes it) or --gguf FILE"
        )
    return LlamaCppBackend(folder, gguf_path=gguf, n_threads=_threads()), None


def llama_cpp_peer(gguf: str | Path | None, folder: str | Path | None) -> tuple[Any, str | None]:
    """(a timer for llama.cpp on the GGUF ``gguf``, None), or (None, why it is skipped)."""
    backend, skipped = _llama_cpp_backend(gguf, folder)
    return (_LlamaCppTimer(backend) if backend is not None else None), skipped


def llama_cpp_scorer(
    gguf: str | Path | None, folder: str | Path | None
) -> tuple[Callable[[list[str]], list[np.ndarray]] | None, str | None]:
    """(per-base bp log-likelihoods of sequences from llama.cpp on ``gguf``, None), or (None, why
    the fidelity row is skipped). See :func:`hexamer.bench.llamacpp.scoring.llama_cpp_per_base`."""
    from hexamer.bench.llamacpp.scoring import llama_cpp_per_base

    backend, skipped = _llama_cpp_backend(gguf, folder)
    if backend is None:
        return None, skipped
    return (lambda seqs: llama_cpp_per_base(backend, seqs)), None


def llama_cpp_scorers(
    ggufs: Mapping[str, str | Path | None], folder: str | Path | None
) -> tuple[dict[str, Callable[[list[str]], list[np.ndarray]]], dict[str, str]]:
    """The fidelity rows of llama.cpp GGUFs (type -> file): scorers by row name, and the reasons
    of the rows that are skipped (see :func:`llama_cpp_scorer`)."""
    peers, skipped = {}, {}
    for qtype, path in ggufs.items():
        peer, why = llama_cpp_scorer(path, folder)
        if peer is None:
            skipped[llama_cpp_name(qtype)] = str(why)
        else:
            peers[llama_cpp_name(qtype)] = peer
    return peers, skipped


# ------------------------------------------------------------------------------------- fidelity
def held_out_dna(window_bp: int, n_windows: int, seed: int = 0) -> list[tuple[str, str]]:
    """``n_windows`` (name, sequence) A/C/G/T-only windows from the held-out tail of every
    sequence in ``hexamer/data/dna``, spread over the sequences in turn."""
    tails = []
    for path in sorted(DNA_DIR.glob("*.fa.gz")):
        with gzip.open(path, "rt") as f:
            seq = "".join(line.strip() for line in f if not line.startswith(">")).upper()
        tails.append((path.name.removesuffix(".fa.gz"), seq[int(len(seq) * (1 - HELD_OUT)) :]))
    rng = random.Random(seed)
    windows: list[tuple[str, str]] = []
    attempts = 0
    while len(windows) < n_windows:
        attempts += 1
        if attempts > 100 * n_windows:
            raise RuntimeError(f"could not find {n_windows} A/C/G/T-only windows of {window_bp} bp")
        name, tail = tails[len(windows) % len(tails)]
        if len(tail) < window_bp:
            continue
        start = rng.randrange(len(tail) - window_bp + 1)
        window = tail[start : start + window_bp]
        if set(window) <= set("ACGT"):
            windows.append((f"{name}:{start}", window))
    return windows


def _substitute(seq: str, fraction: float, rng: random.Random) -> str:
    bases = list(seq)
    for i in rng.sample(range(len(bases)), max(1, round(fraction * len(bases)))):
        bases[i] = rng.choice([b for b in "ACGT" if b != bases[i]])
    return "".join(bases)


def _per_base(carbon: Carbon, seqs: list[str], batch: int) -> list[np.ndarray]:
    out: list[np.ndarray] = []
    for i in range(0, len(seqs), batch):
        for r in carbon.score(seqs[i : i + batch], level="bp"):
            assert r.per_base is not None
            out.append(np.asarray(r.per_base, dtype=np.float64))
    return out


def run_quant_fidelity(
    carbons: dict[str, Carbon],
    *,
    model_name: str,
    n_variants: int = 200,
    n_windows: int = 64,
    window_bp: int = 600,
    substitution: float = 0.10,
    batch_size: int = 8,
    seed: int = 0,
    peers: Mapping[str, Callable[[list[str]], list[np.ndarray]]] | None = None,
    peers_skipped: Mapping[str, str] | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> BenchReport:
    """Fidelity of every variant against float32 (see the module docstring for the measures).

    Each of ``peers`` (row name -> per-base log-likelihoods of a list of sequences, e.g.
    :func:`llama_cpp_scorer`) is scored on the same sequences as one more row; each of
    ``peers_skipped`` (row name -> reason) is a ``skipped`` row. A peer that fails gets a
    ``failed`` row."""
    from hexamer.evals.metrics import auroc, spearman

    rng = random.Random(seed)
    windows = held_out_dna(window_bp, max(n_variants, n_windows), seed)
    snv_ref, snv_alt = [], []
    for _, seq in windows[:n_variants]:  # one SNV in the middle of each window
        mid = len(seq) // 2
        alt = rng.choice([b for b in "ACGT" if b != seq[mid]])
        snv_ref.append(seq)
        snv_alt.append(seq[:mid] + alt + seq[mid + 1 :])
    real = [seq for _, seq in windows[:n_windows]]
    fake = [_substitute(seq, substitution, rng) for seq in real]
    labels = [1] * len(real) + [0] * len(fake)
    scorers: dict[str, Callable[[list[str]], list[np.ndarray]]] = {
        v: (lambda seqs, c=carbon: _per_base(c, seqs, batch_size)) for v, carbon in carbons.items()
    }
    for name, peer in (peers or {}).items():
        scorers[name] = lambda seqs, p=peer: [np.asarray(x, dtype=np.float64) for x in p(seqs)]
    results: dict[str, dict[str, Any]] = {}
    failed: dict[str, str] = {}
    for v, per_base in scorers.items():
        log(f"fidelity: scoring with {v} ...")
        try:
            ref_lp = per_base(snv_ref)
            alt_lp = per_base(snv_alt)
            task_lp = per_base(real + fake)
        except (RuntimeError, OSError, ValueError) as exc:
            if v in carbons:
                raise
            failed[v] = f"{type(exc).__name__}: {exc}"  # the peer's failure is a row, not a lost report
            continue
        results[v] = {
            "scores": np.array([np.nansum(a) - np.nansum(r) for a, r in zip(alt_lp, ref_lp, strict=True)]),
            "per_base": np.concatenate(ref_lp + task_lp),
            "task": [float(np.nanmean(x)) for x in task_lp],
        }
    base = results["float32"]
    base_auc = auroc(labels, base["task"])
    report = BenchReport(
        name="quant-fidelity",
        title=f"fidelity vs float32 ({model_name}): {n_variants} SNVs, {n_windows} real vs {n_windows} "
        f"{substitution:.0%}-substituted windows of {window_bp} bp",
        columns=("variant", "status", "Spearman vs fp32", "|Δscore| median", "|Δscore| p99", "|Δscore| max",
                 "AUROC", "ΔAUROC", "|Δ log P| mean", "|Δ log P| max", "Δ mean LL"),
        formats={"Spearman vs fp32": "{:.5f}", "|Δscore| median": "{:.2g}", "|Δscore| p99": "{:.2g}",
                 "|Δscore| max": "{:.2g}", "AUROC": "{:.4f}", "ΔAUROC": "{:+.4f}", "|Δ log P| mean": "{:.2g}",
                 "|Δ log P| max": "{:.2g}", "Δ mean LL": "{:+.2g}"},
    )  # fmt: skip
    spread = float(np.std(base["scores"]))
    for v, res in results.items():
        d_score = np.abs(res["scores"] - base["scores"])
        d_lp = np.abs(res["per_base"] - base["per_base"])
        d_lp = d_lp[np.isfinite(d_lp)]
        auc = auroc(labels, res["task"])
        report.rows.append(
            {
                "variant": v,
                "status": "ok",
                "Spearman vs fp32": spearman(base["scores"], res["scores"]),
                "|Δscore| median": float(np.median(d_score)),
                "|Δscore| p99": float(np.quantile(d_score, 0.99)),
                "|Δscore| max": float(d_score.max()),
                "AUROC": auc,
                "ΔAUROC": auc - base_auc,
                "|Δ log P| mean": float(d_lp.mean()),
                "|Δ log P| max": float(d_lp.max()),
                "Δ mean LL": float(np.nanmean(res["per_base"]) - np.nanmean(base["per_base"])),
                "score_sd_fp32": spread,
                "n_variants": n_variants,
                "n_windows": n_windows,
                "n_bases": int(d_lp.size),
            }
        )
    for v, why in failed.items():
        report.rows.append({"variant": v, "status": "failed", "reason": why})
    for name, why in (peers_skipped or {}).items():
        report.rows.append({"variant": name, "status": "skipped", "reason": why})
        report.notes.append(f"{name}: skipped ({why})")
    if peers:
        report.notes.append(
            f"{', '.join(peers)}: llama.cpp's logits of the 6-mer rows on the same token ids (its own "
            "quantization of the same weights), turned into bp log-likelihoods by hexamer's FNS scoring"
        )
    report.notes.append(
        f"score = LL(alt window) - LL(ref window), bp level, SNV at the window centre; float32 score "
        f"SD {spread:.3g}. AUROC: mean bp log-likelihood separating real held-out DNA (label 1) from "
        f"the same windows with {substitution:.0%} of bases substituted (label 0): synthetic labels "
        "with a known answer, not clinical ones. Windows: the held-out last 10% of hexamer/data/dna."
    )
    return report
