"""Run one task (or the whole suite): load, score with a cache, metrics with bootstrap CIs, JSON.

Every per-example record is appended to a JSON-lines cache file as soon as the task yields it. The
file is keyed by the model's fingerprint, the task, the level, the task options and the data file
(its path, size and mtime), so a killed run resumes where it stopped and a rerun scores nothing.
``--limit`` samples rows like the published scripts' ``df.sample(n, random_state=seed)``, which is
prefix-stable: a larger limit reuses the records of a smaller one.

Confidence intervals: the metrics are recomputed on ``n_boot`` resamples (with replacement) of the
records, and the interval is the 2.5th-97.5th percentile of the resampled values (percentile
bootstrap, seeded). Count metrics (``n`` and ``n_*``) get no interval.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hexamer.evals.registry import TASK_NAMES, get_task
from hexamer.evals.task import EvalContext, Level, Record, Task

if TYPE_CHECKING:
    from rich.progress import Progress

    from hexamer.carbon import Carbon

__all__ = [
    "CACHE_VERSION",
    "EvalResult",
    "RecordCache",
    "bootstrap_ci",
    "find_task_data",
    "is_count_metric",
    "published_summary",
    "run_suite",
    "run_task",
]

CACHE_VERSION = 1
#: where ``--suite all --data-root DATA`` looks for the tasks of the other module (perturbation,
#: NIAH) when their classes do not say; the public dataset names, old and new
FALLBACK_DATA: dict[str, tuple[str, ...]] = {
    "triplet": ("carbon-perturbation-bench", "carbon_tasks", "perturbation"),
    "codon": ("carbon-perturbation-bench", "carbon_tasks", "perturbation"),
    "niah": ("genome-niah", "genomic-niah", "niah"),
}


def is_count_metric(name: str) -> bool:
    """Counts (``n``, ``n_errors``, ``breakdowns.x.y.n``...) are reported without an interval."""
    last = name.rsplit(".", 1)[-1]
    return last == "n" or last.startswith("n_") or last.startswith("num_")


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.generic):
        return _json_safe(value.item())
    return value


# --------------------------------------------------------------------------- cache


class RecordCache:
    """Append-only JSON-lines file of one (model, task, level, options, data) combination."""

    def __init__(self, path: Path | None, header: Mapping[str, Any]) -> None:
        self.path = path
        self.header = dict(header)
        self.records: dict[str, Record] = {}
        self._checked_tail = False
        if path is not None and path.exists():
            self._load(path)

    @staticmethod
    def key(header: Mapping[str, Any]) -> str:
        blob = json.dumps(_json_safe(dict(header)), sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def _load(self, path: Path) -> None:
        with path.open("r", encoding="utf-8") as fh:
            for line in fh:
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut short by a killed run: its example is scored again
                if isinstance(rec, dict) and "id" in rec and "_header" not in rec:
                    self.records[str(rec["id"])] = rec

    def add(self, record: Record) -> None:
        self.records[str(record["id"])] = record
        if self.path is None:
            return
        new = not self.path.exists()
        if new:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        elif not self._checked_tail:  # a killed run may have left half a line: end it first
            with self.path.open("rb") as fh:
                size = fh.seek(0, os.SEEK_END)
                if size:
                    fh.seek(size - 1)
                cut = size > 0 and fh.read(1) != b"\n"
            if cut:
                with self.path.open("a", encoding="utf-8") as fh:
                    fh.write("\n")
        self._checked_tail = True
        with self.path.open("a", encoding="utf-8") as fh:
            if new:
                fh.write(json.dumps({"_header": _json_safe(self.header)}, default=str) + "\n")
            fh.write(json.dumps(_json_safe(record), default=str) + "\n")


# --------------------------------------------------------------------------- bootstrap


def bootstrap_ci(
    metrics: Callable[[list[Record]], Mapping[str, float]],
    records: Sequence[Record],
    *,
    n_boot: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
) -> dict[str, tuple[float, float]]:
    """Percentile bootstrap interval of every non-count metric (NaN resamples are ignored)."""
    if n_boot <= 0 or not records:
        return {}
    rng = np.random.default_rng(seed)
    samples: dict[str, list[float]] = {}
    n = len(records)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(n_boot):
            pick = rng.integers(0, n, n)
            values = metrics([records[i] for i in pick])
            for name, v in values.items():
                if is_count_metric(name) or not isinstance(v, int | float):
                    continue
                samples.setdefault(name, []).append(float(v))
    out = {}
    for name, vals in samples.items():
        arr = np.asarray(vals, dtype=np.float64)
        arr = arr[np.isfinite(arr)]
        if arr.size:
            lo, hi = np.percentile(arr, [100 * alpha / 2, 100 * (1 - alpha / 2)])
            out[name] = (float(lo), float(hi))
    return out


# --------------------------------------------------------------------------- results


@dataclass
class EvalResult:
    """The outcome of one task at one level (``status`` ok / skipped / error)."""

    task: str
    title: str
    level: str
    status: str = "ok"
    reason: str = ""
    headline: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    ci: dict[str, tuple[float, float]] = field(default_factory=dict)
    reference: dict[str, dict[str, float]] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)  # the published script's summary keys
    n_examples: int = 0
    n_cached: int = 0
    n_errors: int = 0
    elapsed_s: float = 0.0
    data: str = ""
    model: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    plots: list[str] = field(default_factory=list)
    records_file: str = ""
    cache_file: str = ""
    n_boot: int = 0
    seed: int = 0
    limit: int | None = None

    @property
    def headline_value(self) -> float | None:
        v = self.metrics.get(self.headline)
        return None if v is None or not math.isfinite(v) else float(v)

    def as_dict(self) -> dict[str, Any]:
        return _json_safe(
            {
                "task": self.task,
                "title": self.title,
                "level": self.level,
                "status": self.status,
                "reason": self.reason,
                "headline": self.headline,
                "headline_value": self.headline_value,
                "metrics": self.metrics,
                "ci95": {k: list(v) for k, v in self.ci.items()},
                "reference": self.reference,
                "summary": self.summary,
                "n_examples": self.n_examples,
                "n_cached": self.n_cached,
                "n_errors": self.n_errors,
                "elapsed_s": round(self.elapsed_s, 3),
                "data": self.data,
                "model": self.model,
                "options": self.options,
                "notes": self.notes,
                "plots": self.plots,
                "records_file": self.records_file,
                "cache_file": self.cache_file,
                "bootstrap": {"n": self.n_boot, "seed": self.seed, "interval": "percentile 95%"},
                "limit": self.limit,
            }
        )


def published_summary(task: Task, metrics: Mapping[str, float], extra: Mapping[str, Any]) -> dict[str, Any]:
    """The metrics under the published script's summary keys (``task.summary_keys``), plus ``extra``."""
    out: dict[str, Any] = dict(extra)
    keys = dict(task.summary_keys)
    for name, value in metrics.items():
        head, _, rest = name.partition(".")
        if head not in keys:
            continue
        if is_count_metric(name) and isinstance(value, float) and value.is_integer():
            value = int(value)
        if not rest:
            out[keys[head]] = value
            continue
        node = out.setdefault(keys[head], {})
        parts = rest.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    return _json_safe(out)


def _task_options(task: Task, options: Mapping[str, Any]) -> dict[str, Any]:
    defaults = dict(getattr(task, "default_options", {}) or {})
    if not defaults:
        return dict(options)
    return {k: options.get(k, v) for k, v in defaults.items()}


def _data_id(path: Path) -> dict[str, Any]:
    path = path.resolve()
    if path.is_file():
        st = path.stat()
        return {"path": str(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    files = sorted(p for p in path.rglob("*") if p.is_file())
    h = hashlib.sha256()
    for p in files:
        st = p.stat()
        h.update(f"{p.relative_to(path)}:{st.st_size}:{st.st_mtime_ns};".encode())
    return {"path": str(path), "tree": h.hexdigest()[:16]}


def _model_name(carbon: Carbon) -> str:
    return str(getattr(carbon.tokenizer, "name_or_path", "") or "")


def run_task(
    task: Task | str,
    data: Path,
    carbon: Carbon,
    *,
    level: Level = "token",
    limit: int | None = None,
    seed: int = 0,
    batch_size: int = 16,
    options: Mapping[str, Any] | None = None,
    cache_dir: Path | None = None,
    out_dir: Path | None = None,
    n_boot: int = 1000,
    progress: Progress | None = None,
    on_record: Callable[[Record], None] | None = None,
) -> EvalResult:
    """Run one task at one level; see the module docstring for caching and intervals."""
    task = get_task(task) if isinstance(task, str) else task
    if level not in task.levels:
        raise ValueError(f"task {task.name} has no {level!r} level (it allows {', '.join(task.levels)})")
    started = time.perf_counter()
    opts = _task_options(task, options or {})
    fingerprint = carbon.backend.fingerprint()
    header = {
        "version": CACHE_VERSION,
        "model": fingerprint,
        "task": task.name,
        "level": level,
        "options": opts,
        "data": _data_id(Path(data)),
    }
    key = RecordCache.key(header)
    cache_path = None if cache_dir is None else Path(cache_dir) / f"{task.name}-{level}-{key}.jsonl"
    cache = RecordCache(cache_path, header)

    task.configure(opts)
    examples = task.load(Path(data), limit=limit, seed=seed)
    ids = [str(e["id"]) for e in examples]
    if len(set(ids)) != len(ids):
        raise ValueError(f"task {task.name}: example ids are not unique")
    todo = [e for e in examples if str(e["id"]) not in cache.records]
    n_cached = len(examples) - len(todo)
    ctx = EvalContext(carbon=carbon, level=level, batch_size=batch_size, options=opts)
    bar = None
    if progress is not None:
        bar = progress.add_task(f"{task.name} ({level})", total=len(examples), completed=n_cached)
    wanted = set(ids)
    if todo:
        for record in task.score(todo, ctx):
            if str(record.get("id")) not in wanted:
                raise ValueError(f"task {task.name} yielded a record for unknown id {record.get('id')!r}")
            cache.add(record)
            if on_record is not None:
                on_record(record)
            if bar is not None and progress is not None:
                progress.advance(bar)
    missing = [i for i in ids if i not in cache.records]
    if missing:
        raise RuntimeError(
            f"task {task.name} produced no record for {len(missing)} example(s), e.g. {missing[0]}"
        )
    records = [cache.records[i] for i in ids]
    metrics = dict(task.metrics(records))
    ci = bootstrap_ci(task.metrics, records, n_boot=n_boot, seed=seed)
    n_errors = sum(1 for r in records if r.get("error"))
    result = EvalResult(
        task=task.name,
        title=task.title,
        level=level,
        headline=task.headline,
        metrics=metrics,
        ci=ci,
        reference={m: dict(v) for m, v in task.reference.items()},
        n_examples=len(records),
        n_cached=n_cached,
        n_errors=n_errors,
        data=str(data),
        model=_model_name(carbon),
        options=opts,
        notes=list(getattr(ctx, "notes", [])),
        cache_file=str(cache_path) if cache_path else "",
        n_boot=n_boot,
        seed=seed,
        limit=limit,
    )
    result.summary = published_summary(
        task,
        metrics,
        {
            "model": result.model,
            "model_fingerprint": fingerprint,
            "backend": "hexamer",
            "level": level,
            **opts,
        },
    )
    if out_dir is not None:
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        stem = f"{task.name}-{level}"
        rec_path = out_dir / f"{stem}.records.jsonl"
        with rec_path.open("w", encoding="utf-8") as fh:
            for r in records:
                fh.write(json.dumps(_json_safe(r), default=str) + "\n")
        result.records_file = str(rec_path)
        plot_dir = out_dir / "plots" / stem
        plot_dir.mkdir(parents=True, exist_ok=True)
        try:
            result.plots = [str(p) for p in task.plots(records, plot_dir)]
        except (ValueError, RuntimeError, ImportError) as exc:  # a figure never sinks the run
            result.notes.append(f"plots skipped: {exc}")
        result.elapsed_s = time.perf_counter() - started
        (out_dir / f"{stem}.json").write_text(json.dumps(result.as_dict(), indent=2, default=str))
    result.elapsed_s = time.perf_counter() - started
    return result


# --------------------------------------------------------------------------- suite


def find_task_data(task: Task, data_root: Path) -> tuple[Path | None, list[Path]]:
    """The first of the task's ``data_candidates`` that exists under ``data_root``, and what was tried."""
    candidates = tuple(getattr(task, "data_candidates", ()) or ()) or FALLBACK_DATA.get(task.name, ())
    tried = [data_root / c for c in candidates]
    for path in tried:
        if path.exists():
            return path, tried
    return None, tried


def _not_run(
    name: str,
    task: Task,
    level: Level,
    status: str,
    reason: str,
    *,
    reference: bool = True,
    data: Path | None = None,
) -> EvalResult:
    """The result of a task that was skipped or failed: its status and why, no metrics."""
    return EvalResult(
        task=name,
        title=task.title,
        level=level,
        status=status,
        headline=task.headline,
        reference={m: dict(v) for m, v in task.reference.items()} if reference else {},
        reason=reason,
        data="" if data is None else str(data),
    )


def run_suite(
    carbon: Carbon,
    data_root: Path,
    *,
    tasks: Iterable[str] = TASK_NAMES,
    levels: Sequence[Level] = ("token",),
    on_result: Callable[[EvalResult], None] | None = None,
    **run_options: Any,
) -> list[EvalResult]:
    """Every task whose data is under ``data_root``, at every level it allows; the others are
    reported as skipped (missing data, task not installed) or error (the message), never raised."""
    results: list[EvalResult] = []

    def emit(r: EvalResult) -> None:
        results.append(r)
        if on_result is not None:
            on_result(r)

    for name in tasks:
        try:
            task = get_task(name)
        except ImportError as exc:
            for level in levels:
                emit(
                    EvalResult(
                        task=name,
                        title=name,
                        level=level,
                        status="skipped",
                        reason=f"task not available: {exc}",
                    )
                )
            continue
        data, tried = find_task_data(task, Path(data_root))
        for level in levels:
            if level not in task.levels:
                emit(
                    _not_run(
                        name,
                        task,
                        level,
                        "skipped",
                        f"no {level}-level variant of this task",
                        reference=False,
                    )
                )
                continue
            if data is None:
                looked = ", ".join(str(p) for p in tried) or "(the task names no data location)"
                emit(_not_run(name, task, level, "skipped", f"no data (looked for {looked})"))
                continue
            try:
                emit(run_task(task, data, carbon, level=level, **run_options))
            except FileNotFoundError as exc:  # e.g. ClinVar without its hg38 reference
                emit(_not_run(name, task, level, "skipped", f"missing data: {exc}", data=data))
            except (ValueError, RuntimeError, OSError, KeyError, TypeError) as exc:
                emit(_not_run(name, task, level, "error", f"{type(exc).__name__}: {exc}", data=data))
    return results


def write_json(results: Sequence[EvalResult], path: Path, extra: Mapping[str, Any] | None = None) -> None:
    """All results in one JSON file."""
    payload = {**(extra or {}), "results": [r.as_dict() for r in results]}
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, default=str))
    os.replace(tmp, path)
