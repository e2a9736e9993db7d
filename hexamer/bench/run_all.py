"""``hexamer bench all``: every benchmark table in one go, written to a folder with a Markdown summary.

Each bench runs in turn and is isolated: one that is missing (the speculative-decoding, serving,
llama.cpp and fine-tuning benches live in their own modules) or fails is recorded with the reason and the rest
go on. ``quick`` picks small shapes and short outputs so the whole set takes minutes on a laptop CPU;
the figures are then about code paths, not about Carbon's speed.
"""

from __future__ import annotations

import importlib
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hexamer.bench.report import BenchReport
from hexamer.bench.timing import MIN_ROUNDS
from hexamer.machine import machine_info

#: How each of our tables is plotted: BenchReport.plot keyword arguments.
PLOTS: dict[str, dict[str, Any]] = {
    "tokenizer": {"x": "implementation", "y": "Mbp/s", "group": "op", "log_y": True},
    "generate": {"x": "batch", "y": "bp/s", "group": "backend"},
    "throughput": {"x": "batch", "y": "kbp/s", "group": "backend"},
    "fns": {"x": "case", "y": "seconds", "group": "level", "log_y": True},
    "roofline": {"x": "case", "y": "% of limit"},
}

#: Benches other modules provide: (module, function); each is called as fn(quick=..., log=...).
EXTERNAL = {
    "spec": ("hexamer.bench.spec", "run_spec_bench"),
    "serve": ("hexamer.bench.serve", "run_serve_bench"),
    "llamacpp": ("hexamer.bench.llamacpp", "run_llamacpp_bench"),
    "finetune": ("hexamer.bench.finetune", "run_finetune_bench"),
}

#: Optional peers an EXTERNAL bench module needs: module -> its function returning (available, why).
#: A bench whose peer is missing is "skipped" with the install hint, not a failure with a traceback.
PREREQUISITES = {"hexamer.bench.llamacpp": "llama_cpp_available"}

#: How tables of the EXTERNAL benches are plotted. Kept apart from PLOTS, whose keys are also the
#: benches whose failure fails ``hexamer bench all``. spec: speed-up over the target alone per
#: synthetic pair (noise level), one bar per mode and decoding (as ``hexamer bench spec --plot``).
EXTERNAL_PLOTS: dict[str, dict[str, Any]] = {
    "spec": {"x": "pair", "y": "speed-up", "group": "case"},
    "finetune": {"x": "case", "y": "examples/s", "log_y": True},
}


@dataclass
class BenchOutcome:
    name: str
    report: BenchReport | None = None
    status: str = "ok"  # "ok", "skipped" or "failed"
    reason: str = ""
    seconds: float = 0.0
    files: list[Path] = field(default_factory=list)


def save_report(report: BenchReport, out_dir: Path, plot: dict[str, Any] | None = None) -> list[Path]:
    """Write ``<name>.json`` and, when a plot is defined (``plot``, else :data:`PLOTS` or
    :data:`EXTERNAL_PLOTS`), ``<name>.png`` into ``out_dir``."""
    out_dir = Path(out_dir)
    files = [report.write_json(out_dir / f"{report.name}.json")]
    spec = plot if plot is not None else PLOTS.get(report.name, EXTERNAL_PLOTS.get(report.name))
    if spec and report.rows:
        files.append(report.plot(out_dir / f"{report.name}.png", **spec))
    return files


def add_plot_labels(report: BenchReport) -> BenchReport:
    """Give fns/roofline rows a ``case`` label (task or item plus batch) so each row gets its own bar."""
    for r in report.rows:
        if "case" not in r:
            what = r.get("task") or r.get("item")
            r["case"] = what if r.get("batch") is None else f"{what}, batch {r['batch']}"
    return report


def summary_markdown(outcomes: list[BenchOutcome], command: str) -> str:
    """One Markdown page: the machine, then each table with its notes, then what was skipped."""
    info = machine_info()
    lines = [
        "# hexamer benchmark summary",
        "",
        f"Command: `{command}`",
        "",
        f"Machine: {info['processor']}, {info['cpu_count']} CPUs, torch {info['torch']} "
        f"({info['torch_threads']} threads), Python {info['python']}, {info['platform']}",
        "",
    ]
    for o in outcomes:
        if o.report is None:
            continue
        lines += [f"## {o.report.title}", "", f"`{o.report.command}` — {o.seconds:.1f} s", ""]
        lines += [o.report.to_markdown(), ""]
        lines += [f"- {n}" for n in o.report.notes]
        if o.files:
            lines += ["", "Files: " + ", ".join(f"`{f.name}`" for f in o.files)]
        lines.append("")
    missing = [o for o in outcomes if o.report is None]
    if missing:
        lines += ["## Not run", ""]
        lines += [f"- **{o.name}** ({o.status}): {o.reason}" for o in missing]
        lines.append("")
    return "\n".join(lines)


def run_external(name: str, *, quick: bool, log: Callable[[str], None]) -> BenchOutcome:
    """Call another module's bench if it exists; a missing module is a skip, an error a failure."""
    module_name, func_name = EXTERNAL[name]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        return BenchOutcome(name, status="skipped", reason=f"{module_name} is not available ({exc})")
    fn = getattr(module, func_name, None)
    if fn is None:
        return BenchOutcome(name, status="skipped", reason=f"{module_name} has no {func_name}()")
    check = getattr(module, PREREQUISITES.get(module_name, ""), None)
    if check is not None:
        available, why = check()
        if not available:
            return BenchOutcome(name, status="skipped", reason=why)
    start = time.perf_counter()
    try:
        report = fn(quick=quick, log=log)
    except Exception as exc:
        log(traceback.format_exc())
        return BenchOutcome(name, status="failed", reason=f"{type(exc).__name__}: {exc}")
    if not isinstance(report, BenchReport):
        return BenchOutcome(name, status="failed", reason=f"{func_name}() returned {type(report).__name__}")
    return BenchOutcome(name, report=report, seconds=time.perf_counter() - start)


@dataclass
class _OwnBenches:
    """The benches of this package, each a method returning its table, sharing one model load."""

    folder: str | Path
    quick: bool
    dtype: str
    batches: tuple[int, ...]
    prompt_bp: int
    full_bp: int  # new bases of generate and throughput
    short_bp: int  # new bases of fns and roofline
    tokenizer_sizes: list[int] | None
    log: Callable[[str], None]
    repeats: int = MIN_ROUNDS  # quick or not: one round cannot tell a figure from noise
    _carbon: Any = None

    def table(self) -> dict[str, Callable[[], BenchReport]]:
        """Name -> the function that runs that bench, in the order they run."""
        return {
            "tokenizer": self.tokenizer,
            "generate": self.generate,
            "throughput": self.throughput,
            "fns": self.fns,
            "roofline": self.roofline,
        }

    def carbon(self) -> Any:
        """The model of fns and roofline, loaded on first use."""
        if self._carbon is None:
            import torch

            from hexamer import Carbon

            self._carbon = Carbon.from_pretrained(
                self.folder, dtype=getattr(torch, self.dtype), device="cpu", max_batch_size=max(self.batches)
            )
        return self._carbon

    def tokenizer(self) -> BenchReport:
        from hexamer.bench.tokenizer import run_tokenizer_bench, tokenizer_report
        from hexamer.tokenizer import CarbonTokenizer

        tok = CarbonTokenizer.from_pretrained(self.folder)
        sizes = self.tokenizer_sizes or ([1_000_000] if self.quick else [1_000_000, 100_000_000])
        repeats = 2 if self.quick else 3
        return tokenizer_report(run_tokenizer_bench(tok, sizes, repeats=repeats), repeats)

    def generate(self) -> BenchReport:
        from hexamer.bench.generate import generate_report, run_generate_bench

        rows = run_generate_bench(
            self.folder,
            batch_sizes=self.batches,
            prompt_bp=self.prompt_bp,
            new_bp=self.full_bp,
            dtype=self.dtype,
            repeats=self.repeats,
            log=self.log,
        )
        return generate_report(
            rows, prompt_bp=self.prompt_bp, new_bp=self.full_bp, dtype=self.dtype, repeats=self.repeats
        )

    def throughput(self) -> BenchReport:
        from hexamer.bench.throughput import BACKENDS, make_backends, run_throughput_bench

        backends = make_backends(
            self.folder, BACKENDS, dtype=self.dtype, max_batch=max(self.batches), log=self.log
        )
        return run_throughput_bench(
            backends,
            batch_sizes=self.batches,
            prompt_bp=self.prompt_bp,
            new_bp=self.full_bp,
            repeats=self.repeats,
            log=self.log,
        )

    def fns(self) -> BenchReport:
        from hexamer.bench.fns_cost import run_fns_bench

        return add_plot_labels(
            run_fns_bench(
                self.carbon(),
                batch_sizes=self.batches,
                prompt_bp=self.prompt_bp,
                new_bp=self.short_bp,
                score_bp=self.prompt_bp,
                score_sequences=8 if self.quick else 16,
                repeats=2 if self.quick else 3,
                log=self.log,
            )
        )

    def roofline(self) -> BenchReport:
        from hexamer.bench.roofline import run_roofline_bench

        return add_plot_labels(
            run_roofline_bench(
                self.carbon(),
                batch_sizes=tuple(sorted(self.batches)),
                prompt_bp=self.prompt_bp,
                new_bp=max(self.short_bp, 12),
                repeats=2 if self.quick else 3,
                quick=self.quick,
                log=self.log,
            )
        )


def _run_own(
    name: str, bench: Callable[[], BenchReport], command: str, log: Callable[[str], None]
) -> BenchOutcome:
    """Run one of this package's benches; an error is a failure, recorded with its reason."""
    start = time.perf_counter()
    try:
        report = bench()
        report.command = command
        return BenchOutcome(name, report=report, seconds=time.perf_counter() - start)
    except Exception as exc:
        log(traceback.format_exc())
        return BenchOutcome(name, status="failed", reason=f"{type(exc).__name__}: {exc}")


def _save_outcome(outcome: BenchOutcome, out: Path, price_per_hour: float | None) -> None:
    """Add the economics columns and write the table (and its plot) into ``out``."""
    from hexamer.bench.report import add_economics

    assert outcome.report is not None
    if price_per_hour is not None:
        add_economics(outcome.report, price_per_hour)
    try:
        outcome.files = save_report(outcome.report, out)
    except Exception as exc:  # a plot must not lose the table
        outcome.files = [outcome.report.write_json(out / f"{outcome.report.name}.json")]
        outcome.report.notes.append(f"plot failed: {type(exc).__name__}: {exc}")


def run_all(
    out_dir: str | Path,
    *,
    folder: str | Path,
    quick: bool = True,
    dtype: str = "float32",
    only: set[str] | None = None,
    batch_sizes: tuple[int, ...] = (16, 1),
    prompt_bp: int = 1080,
    new_bp: int | None = None,
    tokenizer_sizes: list[int] | None = None,
    command: str = "hexamer bench all",
    log: Callable[[str], None] = lambda _: None,
    price_per_hour: float | None = None,
) -> list[BenchOutcome]:
    """Run every bench on the model in ``folder``; JSON, PNGs and ``summary.md`` go to ``out_dir``.

    ``new_bp`` defaults to 60 with ``quick`` (1,080 otherwise; fns and roofline use 360), and the
    workload options override the quick/full defaults (tests use them to stay in seconds).
    ``price_per_hour`` adds bp/hour and $ per Gbp to every table with a throughput column.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ours = _OwnBenches(
        folder,
        quick=quick,
        dtype=dtype,
        batches=tuple(batch_sizes),
        prompt_bp=prompt_bp,
        full_bp=new_bp or (60 if quick else 1080),
        short_bp=new_bp or (60 if quick else 360),
        tokenizer_sizes=tokenizer_sizes,
        log=log,
    ).table()
    outcomes: list[BenchOutcome] = []
    for name in [*ours, *EXTERNAL]:
        if only is not None and name not in only:
            continue
        log(f"== {name}")
        if name in ours:
            outcome = _run_own(name, ours[name], command, log)
        else:
            outcome = run_external(name, quick=quick, log=log)
        if outcome.report is not None:
            _save_outcome(outcome, out, price_per_hour)
        else:
            log(f"{name}: {outcome.status} — {outcome.reason}")
        outcomes.append(outcome)
    (out / "summary.md").write_text(summary_markdown(outcomes, command))
    return outcomes
