"""Genome needle-in-a-haystack: long-context retrieval of a planted 24 bp VALUE (``evals.md`` §5).

Each row's ``prompt`` is a real-genome haystack holding a random (KEY, VALUE) pair (plus, in the
``neardup_dX`` tasks, 8 decoy pairs whose keys differ from KEY at exactly X positions), followed by
KEY. The model must continue the prompt with VALUE.

* **Generation** (the headline): greedy decoding of ``ceil(value_len_bp / 6)`` tokens (4 for the
  24 bp values) restricted to the 4,096 DNA 6-mers (token level: argmax over 6-mers; bp level: the
  FNS per-base greedy choice), cut to ``value_len_bp`` bases. ``gen_exact_match`` = the prediction
  equals VALUE; ``gen_base_accuracy`` = the share of matching positions (chance 0.25).
* **Likelihood** (a diagnostic; the published README warns it is inflated): the mean log-probability
  of VALUE's tokens after the prompt (token level: full-vocabulary log-softmax, fp32; bp level: mean
  FNS log-marginal of VALUE's bases), for the positive and for the negative continuation (the
  ``negative_sequence`` minus the prompt). ``ll_correct`` = LL(pos) > LL(neg), ``ll_margin`` =
  LL(pos) - LL(neg). The prompt is run once and its KV cache shared by both continuations.

Prompts are ``<dna>`` + the prompt DNA, cut **from the left** to a multiple of 6 bp so that the end
next to the answer stays on a 6-mer boundary (``evals.md`` §8; files written by ``hexamer
build-niah`` are already multiples of 6, so nothing is cut).

YaRN (option ``with_yarn``, the published ``--with_yarn``): the model is run with
``max_position_embeddings`` 65,536 and a YaRN ``rope_scaling`` of factor 4 over an original window
of 32,768, rope theta kept (:meth:`hexamer.Carbon.with_rope`); the numbers are options.

Data layout: the Hub dataset's own, one folder per cell (config ``niah_{L}`` or
``niah_{task}_{L}``, L in 4k...128k), e.g. ``DATA/genomic-niah/data/niah_neardup_d2_8k/test-*.parquet``
or ``DATA/genome-niah/niah_neardup_d2_8k/test.parquet``. Pass the dataset folder (every cell found
is evaluated), one cell's folder, or one file. Rows are kept when their ``context_length_tokens``
equals the cell's L; ``--limit N`` samples N rows per cell.

The parts: cell names and files in :mod:`~hexamer.evals.tasks.niah_cells`, the model side
(YaRN, value log-likelihoods) in :mod:`~hexamer.evals.tasks.niah_scoring`, summaries and the
heat-map in :mod:`~hexamer.evals.tasks.niah_report`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from hexamer.evals.data import ROW_INDEX, read_rows
from hexamer.evals.published import published_reference
from hexamer.evals.task import EvalContext, Example, Record, Task
from hexamer.evals.tasks.niah_cells import (
    cell_name,
    find_cells,
    parse_cell,
    parse_ctx,
    task_of_row,
)
from hexamer.evals.tasks.niah_report import niah_summary, plot_niah_heatmap
from hexamer.evals.tasks.niah_scoring import YARN_DEFAULTS, prefix_ids, value_logliks, yarn_carbon

if TYPE_CHECKING:
    from hexamer.carbon import Carbon

__all__ = [
    "GenomeNiah",
]


def _no_likelihood(note: str) -> Record:
    """The likelihood fields of a row whose value could not be scored, and why."""
    return {"ll_pos": None, "ll_neg": None, "ll_correct": None, "ll_margin": None, "ll_note": note}


def _as_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


class GenomeNiah(Task):
    """Genome-NIAH (4 tasks x 6 contexts); headline: mean greedy exact match over all rows."""

    name = "niah"
    title = "Genome-NIAH"
    headline = "gen_exact_match"
    expected_columns: ClassVar[dict[str, str]] = {
        "uid": "row id",
        "prompt": "haystack DNA followed by the KEY (bp)",
        "value": "the VALUE to retrieve (24 bp)",
        "value_len_bp": "length of value (int, 24)",
        "context_length_tokens": "the cell's context in tokens (4096 ... 131072)",
        "positive_sequence": "prompt + value",
        "negative_sequence": "prompt + a wrong value",
    }
    summary_keys: ClassVar[dict[str, str]] = {
        "n": "n_samples",
        "gen_exact_match": "gen_exact_match",
        "gen_base_accuracy": "gen_base_accuracy",
        "ll_correct": "ll_correct",
        "ll_margin": "ll_margin",
    }
    default_options: ClassVar[dict[str, Any]] = {
        "tasks": "all",  # e.g. "niah,neardup_d2": evaluate only these tasks' cells
        "ctx": "all",  # e.g. "32k,64k": only these contexts
        "with_yarn": False,
        **YARN_DEFAULTS,
        "likelihood": True,
        "prefix": "<dna>",
        "batch_tokens": 131072,
    }

    def __init__(self) -> None:
        self._tasks: set[str] | None = None
        self._ctx: set[int] | None = None

    def configure(self, options: Mapping[str, Any]) -> None:
        """Cell selection: ``tasks`` and ``ctx`` (comma-separated, or "all")."""
        tasks, ctx = options.get("tasks", "all"), options.get("ctx", "all")
        self._tasks = None if _is_all(tasks) else {t.strip() for t in _items(tasks)}
        self._ctx = None if _is_all(ctx) else {parse_ctx(c) for c in _items(ctx)}

    data_candidates = ("genomic-niah", "genome-niah", "niah")
    #: the report's Table 5 and Figure 5, per cell (see :data:`hexamer.evals.published.NIAH_CELLS`)
    reference: ClassVar[dict[str, dict[str, float]]] = published_reference("niah")

    # ------------------------------------------------------------------ data
    def load(self, data: Path, *, limit: int | None = None, seed: int = 0) -> list[Example]:
        out: list[Example] = []
        for config, files in find_cells(Path(data)):
            cell = parse_cell(config) if config else None
            if cell is not None and not self._wanted(*cell):
                continue
            for path in files:
                rows = read_rows(
                    path,
                    required=list(self.expected_columns),
                    optional=["task", "depth"],
                    expected=self.expected_columns,
                    limit=limit,
                    seed=seed,
                )
                for r in rows:
                    ex = self._example(r, cell, path)
                    if ex is not None and self._wanted(ex["task"], ex["ctx"]):
                        out.append(ex)
        ids = [e["id"] for e in out]
        if len(set(ids)) != len(ids):  # uids repeated across files of one cell
            for e in out:
                e["id"] = f"{e['id']}#{e['file']}:{e['row']}"
        return out

    def _wanted(self, task: str, ctx_tokens: int) -> bool:
        tasks, ctxs = getattr(self, "_tasks", None), getattr(self, "_ctx", None)
        return (tasks is None or task in tasks) and (ctxs is None or ctx_tokens in ctxs)

    @staticmethod
    def _example(r: dict[str, Any], cell: tuple[str, int] | None, path: Path) -> Example | None:
        try:
            ctx_tokens = int(r["context_length_tokens"])
        except (TypeError, ValueError):
            ctx_tokens = -1
        if cell is not None:
            task, want = cell
            if ctx_tokens != want:  # the published script keeps rows of the cell's context only
                return None
        else:
            task = task_of_row(r)
        config = cell_name(task, ctx_tokens) if ctx_tokens > 0 else f"niah_{task}_unknown"
        prompt, pos, neg = r["prompt"], r["positive_sequence"], r["negative_sequence"]
        neg_value = (
            neg[len(prompt) :]
            if isinstance(neg, str) and isinstance(prompt, str) and neg.startswith(prompt)
            else None
        )
        pos_value = (
            pos[len(prompt) :]
            if isinstance(pos, str) and isinstance(prompt, str) and pos.startswith(prompt)
            else None
        )
        depth = r.get("depth")
        return {
            "id": f"{config}:{r['uid']}",
            "config": config,
            "task": task,
            "ctx": ctx_tokens,
            "uid": str(r["uid"]),
            "file": path.name,
            "row": r[ROW_INDEX],
            "prompt": prompt,
            "value": r["value"].strip().upper() if isinstance(r["value"], str) else r["value"],
            "value_len_bp": r["value_len_bp"],
            "pos_value": pos_value,
            "neg_value": neg_value,
            "depth": float(depth) if isinstance(depth, int | float) else None,
        }

    # ------------------------------------------------------------------ scoring
    def _model(self, ctx: EvalContext) -> Carbon:
        opts = ctx.options
        if not _as_bool(opts.get("with_yarn", False)):
            return ctx.carbon
        return yarn_carbon(
            ctx.carbon,
            factor=float(opts.get("yarn_factor", YARN_DEFAULTS["yarn_factor"])),
            original_max_position_embeddings=int(opts.get("yarn_original", YARN_DEFAULTS["yarn_original"])),
            max_position_embeddings=int(opts.get("yarn_max_positions", YARN_DEFAULTS["yarn_max_positions"])),
        )

    def score(self, examples: list[Example], ctx: EvalContext) -> Iterator[Record]:
        carbon = self._model(ctx)
        with_yarn = _as_bool(ctx.options.get("with_yarn", False))
        prefix = str(ctx.options.get("prefix") or "<dna>")
        likelihood = _as_bool(ctx.options.get("likelihood", True))
        budget = int(ctx.options.get("batch_tokens") or 131072)
        k = carbon.layout.k
        n_prefix = len(prefix_ids(carbon, prefix))
        ready: list[tuple[Example, Record, str, int]] = []
        for e in examples:
            rec: Record = {
                "id": e["id"],
                "config": e["config"],
                "task": e["task"],
                "ctx": e["ctx"],
                "uid": e["uid"],
                "depth": e["depth"],
                "with_yarn": with_yarn,
                "value": e["value"] if isinstance(e["value"], str) else None,
            }
            problem = _check(e)
            if problem is None:
                vlen = int(e["value_len_bp"])
                trimmed = len(e["prompt"]) % k
                n_tok = n_prefix + (len(e["prompt"]) - trimmed) // k + math.ceil(vlen / k)
                rec.update(n_tokens=n_tok, trimmed_bp=trimmed)
                if n_tok > carbon.context_length:
                    problem = (
                        f"needs {n_tok} tokens, more than the model's context of {carbon.context_length}"
                    )
            if problem is not None:
                rec.update(error=problem, pred=None, gen_exact_match=None, gen_base_accuracy=None)
                yield rec
                continue
            ready.append((e, rec, e["prompt"][trimmed:], vlen))
        # generation batches under a token budget (the KV cache holds every row of a batch)
        batch: list[tuple[Example, Record, str, int]] = []
        used = 0
        for item in sorted(ready, key=lambda t: t[1]["n_tokens"]):
            if batch and used + item[1]["n_tokens"] > budget:
                yield from self._run_batch(carbon, batch, ctx, prefix, likelihood)
                batch, used = [], 0
            batch.append(item)
            used += item[1]["n_tokens"]
            if len(batch) >= max(1, ctx.batch_size):
                yield from self._run_batch(carbon, batch, ctx, prefix, likelihood)
                batch, used = [], 0
        if batch:
            yield from self._run_batch(carbon, batch, ctx, prefix, likelihood)

    def _run_batch(
        self,
        carbon: Carbon,
        batch: list[tuple[Example, Record, str, int]],
        ctx: EvalContext,
        prefix: str,
        likelihood: bool,
    ) -> Iterator[Record]:
        preds = self._generate(carbon, batch, ctx.level, prefix)
        for (e, rec, prompt, vlen), pred in zip(batch, preds, strict=True):
            if isinstance(pred, Exception):
                rec.update(
                    error=f"generation failed: {pred}",
                    pred=None,
                    gen_exact_match=None,
                    gen_base_accuracy=None,
                )
                yield rec
                continue
            value = e["value"]
            rec["pred"] = pred
            rec["gen_exact_match"] = int(pred == value)
            rec["gen_base_accuracy"] = (
                sum(1 for j in range(min(len(pred), vlen)) if pred[j] == value[j]) / vlen
            )
            if likelihood:
                rec.update(self._likelihood(carbon, e, prompt, ctx.level, prefix))
            yield rec

    @staticmethod
    def _generate(
        carbon: Carbon, batch: list[tuple[Example, Record, str, int]], level: str, prefix: str
    ) -> list[str | Exception]:
        """Greedy continuations of ``value_len_bp`` bases; a failing batch is retried row by row."""
        mode = "token" if level == "token" else "bp"
        groups: dict[int, list[int]] = defaultdict(list)
        for i, (_, _, _, vlen) in enumerate(batch):
            groups[vlen].append(i)
        out: list[str | Exception] = [ValueError("not generated")] * len(batch)
        for vlen, idx in groups.items():
            prompts = [prefix + batch[i][2] for i in idx]
            try:
                gens = carbon.generate(prompts, max_bp=vlen, mode=mode, temperature=0.0)
                for i, g in zip(idx, gens, strict=True):
                    out[i] = g.sequence[:vlen]
            except (ValueError, RuntimeError) as exc:
                if len(idx) == 1:
                    out[idx[0]] = exc
                    continue
                for i, p in zip(idx, prompts, strict=True):
                    try:
                        out[i] = carbon.generate(p, max_bp=vlen, mode=mode, temperature=0.0).sequence[:vlen]
                    except (ValueError, RuntimeError) as one:
                        out[i] = one
        return out

    @staticmethod
    def _likelihood(carbon: Carbon, e: Example, prompt: str, level: str, prefix: str) -> Record:
        pos = e["pos_value"] if isinstance(e["pos_value"], str) and e["pos_value"] else e["value"]
        neg = e["neg_value"]
        if not isinstance(neg, str) or not neg:
            return _no_likelihood("negative_sequence does not start with the prompt")
        try:
            lp, ln = value_logliks(carbon, prompt, [pos, neg], level=level, prefix=prefix)  # type: ignore[arg-type]
        except (ValueError, RuntimeError) as exc:
            return _no_likelihood(str(exc))
        if not (math.isfinite(lp) and math.isfinite(ln)):
            return _no_likelihood("value has no whole 6-mer to score")
        return {"ll_pos": lp, "ll_neg": ln, "ll_correct": int(lp > ln), "ll_margin": lp - ln}

    # ------------------------------------------------------------------ metrics
    def metrics(self, records: list[Record]) -> dict[str, float]:
        """Overall means and the same per cell (``niah_neardup_d2_8k.gen_exact_match``...).

        Rows that could not be generated (too long for the model...) are counted in ``n_errors``
        and left out of the means."""
        out = niah_summary(records)
        out["n_errors"] = float(sum(1 for r in records if r.get("error")))
        by_cell: dict[str, list[Record]] = defaultdict(list)
        for r in records:
            by_cell[str(r.get("config"))].append(r)
        for cell, rs in sorted(by_cell.items()):
            for key, value in niah_summary(rs).items():
                out[f"{cell}.{key}"] = value
        return out

    def plots(self, records: list[Record], out_dir: Path) -> list[Path]:
        """Heat-map of exact-match accuracy, context length (columns) x difficulty (rows)."""
        cells: dict[tuple[str, int], list[int]] = defaultdict(list)
        for r in records:
            if r.get("gen_exact_match") is not None:
                cells[(str(r["task"]), int(r["ctx"]))].append(int(r["gen_exact_match"]))
        if not cells:
            return []
        yarn = {bool(r.get("with_yarn")) for r in records}
        suffix = " (YaRN)" if yarn == {True} else "" if yarn == {False} else " (mixed YaRN)"
        path = Path(out_dir) / "niah-heatmap.png"
        plot_niah_heatmap(
            path,
            {key: float(np.mean(v)) for key, v in cells.items()},
            {key: len(v) for key, v in cells.items()},
            title=f"Genome-NIAH exact match{suffix}",
        )
        return [path]


def _is_all(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip().lower() in ("", "all"))


def _items(value: Any) -> list[str]:
    if isinstance(value, list | tuple):
        return [str(v) for v in value]
    return [t for t in str(value).split(",") if t.strip()]


def _check(e: Example) -> str | None:
    prompt, value, vlen = e["prompt"], e["value"], e["value_len_bp"]
    if not isinstance(prompt, str) or not prompt.strip():
        return "prompt must be a non-empty DNA string"
    if not isinstance(value, str) or not value:
        return "value must be a non-empty DNA string"
    try:
        n = int(vlen)
    except (TypeError, ValueError):
        return f"value_len_bp must be an integer, got {vlen!r}"
    if n != len(value):
        return f"value_len_bp is {n} but value has {len(value)} bp"
    if len(prompt) < 6:
        return "prompt is shorter than one 6-mer"
    return None
