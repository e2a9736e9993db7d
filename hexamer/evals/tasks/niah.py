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
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
import torch

from hexamer.evals.data import ROW_INDEX, TABLE_SUFFIXES, read_rows
from hexamer.evals.task import EvalContext, Example, Record, Task
from hexamer.model import KVCache, RopeConfig
from hexamer.tokenizer.dna import encode_dna
from hexamer.tokenizer.segment import OPEN_TAG

if TYPE_CHECKING:
    from hexamer.carbon import Carbon

__all__ = [
    "DIFFICULTIES",
    "GenomeNiah",
    "cell_name",
    "ctx_label",
    "parse_cell",
    "parse_ctx",
    "value_logliks",
    "yarn_carbon",
]

#: task names from easiest to hardest (heat-map rows)
DIFFICULTIES = ("niah", "neardup_d4", "neardup_d2", "neardup_d1")
_CELL = re.compile(r"^niah(?:_(neardup_d\d+))?_(\d+k?)$")

#: the published ``--with_yarn`` override
YARN_DEFAULTS = {"yarn_factor": 4.0, "yarn_original": 32768, "yarn_max_positions": 65536}


def parse_ctx(text: str | int) -> int:
    """Context in tokens from ``"4k"`` (4,096), ``"64k"`` or a plain number."""
    s = str(text).strip().lower()
    try:
        return int(s[:-1]) * 1024 if s.endswith("k") else int(s)
    except ValueError:
        raise ValueError(f"context {text!r} must be a token count such as 4k, 64k or 4096") from None


def ctx_label(tokens: int) -> str:
    """The config label of a context: ``4k`` for 4,096 tokens, the number itself otherwise."""
    return f"{tokens // 1024}k" if tokens % 1024 == 0 else str(tokens)


def cell_name(task: str, ctx_tokens: int) -> str:
    """Config name of a cell: ``niah_4k``, ``niah_neardup_d2_64k``."""
    return f"niah_{ctx_label(ctx_tokens)}" if task == "niah" else f"niah_{task}_{ctx_label(ctx_tokens)}"


def parse_cell(name: str) -> tuple[str, int] | None:
    """(task, context tokens) of a config name, None when the name is not one."""
    m = _CELL.match(name)
    if not m:
        return None
    return (m.group(1) or "niah"), parse_ctx(m.group(2))


def _as_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def yarn_carbon(
    carbon: Carbon,
    *,
    factor: float = 4.0,
    original_max_position_embeddings: int = 32768,
    max_position_embeddings: int = 65536,
) -> Carbon:
    """``carbon`` with the published ``--with_yarn`` override (rope theta kept), weights shared."""
    rope = RopeConfig(
        rope_type="yarn",
        theta=carbon.model.config.rope.theta,
        factor=float(factor),
        original_max_position_embeddings=int(original_max_position_embeddings),
    )
    return carbon.with_rope(rope, max_position_embeddings=int(max_position_embeddings))


def _prefix_ids(carbon: Carbon, prefix: str) -> list[int]:
    if not prefix.endswith(OPEN_TAG):
        raise ValueError(f"prefix must end with {OPEN_TAG!r}, got {prefix!r}")
    head = prefix[: -len(OPEN_TAG)]
    ids = carbon.tokenizer.encode(head) if head else []
    return [*ids, carbon.layout.begin_id]


@torch.inference_mode()
def value_logliks(
    carbon: Carbon,
    prompt: str,
    values: Sequence[str],
    *,
    level: Literal["token", "bp"] = "token",
    prefix: str = "<dna>",
) -> list[float]:
    """Mean log-probability of each ``value``'s tokens (token level, full-vocabulary log-softmax)
    or bases (bp level, FNS log-marginals) right after ``prefix + prompt``.

    ``prompt`` must be a multiple of 6 bp (the value starts on a token boundary). The prompt is run
    once; its KV cache is copied to one row per value, which then runs only the value tokens.
    """
    layout = carbon.layout
    k = layout.k
    if len(prompt) % k:
        raise ValueError(f"prompt length {len(prompt)} is not a multiple of {k}")
    lengths = {len(v) for v in values}
    if len(lengths) > 1:  # one shared batch needs equal lengths; rare, so score one at a time
        return [value_logliks(carbon, prompt, [v], level=level, prefix=prefix)[0] for v in values]
    ids = _prefix_ids(carbon, prefix) + encode_dna(prompt, layout).ids.tolist()
    encs = [encode_dna(v, layout) for v in values]
    n_val = len(encs[0].ids)
    if n_val == 0:
        return [float("nan")] * len(values)
    if len(ids) + n_val > carbon.context_length:
        raise ValueError(
            f"prompt ({len(ids)} tokens) + value ({n_val}) exceeds the model's context of {carbon.context_length}"
        )
    model = carbon.model
    device = model.device
    rows = len(values)
    cache = KVCache.for_model(model, rows, len(ids) + n_val)
    out = model(
        torch.tensor([ids], device=device),
        kv_cache=cache,
        cache_rows=[0],
        logits_at="none",
        return_hidden=True,
    )
    assert out.hidden is not None
    first = out.hidden[:, -1:].expand(rows, 1, -1)  # predicts every value's first token
    if n_val > 1:
        cache.broadcast(0)
        body = torch.tensor([e.ids[:-1].tolist() for e in encs], device=device)
        rest = model(body, kv_cache=cache, logits_at="none", return_hidden=True).hidden
        assert rest is not None
        hidden = torch.cat([first, rest], dim=1)
    else:
        hidden = first
    targets = torch.tensor(np.stack([e.ids for e in encs]), dtype=torch.int64, device=device)
    if level == "token":
        logits = model.compute_logits(hidden)  # (rows, n_val, vocab) float32
        logp = torch.log_softmax(logits.float(), dim=-1).gather(-1, targets[..., None]).squeeze(-1)
        ok = torch.tensor(np.stack([e.n_real == k for e in encs]), device=device)
        return [float(logp[r][ok[r]].mean()) if bool(ok[r].any()) else float("nan") for r in range(rows)]
    from hexamer.fns import score_bases

    kmer = model.compute_logits(hidden, (layout.kmer_start, layout.kmer_stop))
    out_values = []
    for r, e in enumerate(encs):
        real = torch.from_numpy(e.n_real.astype(np.int64)).to(device)
        tgt = torch.where(real > 0, targets[r] - layout.kmer_start, 0)
        s = score_bases(kmer[r], tgt, real)
        out_values.append(float(s.mean) if int(s.n_bases) else float("nan"))
    return out_values


def _is_table(path: Path) -> bool:
    name = path.name.lower().removesuffix(".gz").removesuffix(".bz2")
    return any(name.endswith(s) for s in TABLE_SUFFIXES)


def _split_files(folder: Path) -> list[Path]:
    tables = sorted(p for p in folder.iterdir() if p.is_file() and _is_table(p))
    test = [p for p in tables if re.match(r"test([-_.]|$)", p.name)]
    return test or tables


def find_cells(data: Path) -> list[tuple[str | None, list[Path]]]:
    """(config name or None, files) for every cell at ``data`` (see the module docstring)."""
    if data.is_file():
        for name in (data.parent.name, data.name.split(".")[0]):
            if parse_cell(name):
                return [(name, [data])]
        return [(None, [data])]
    if not data.is_dir():
        raise FileNotFoundError(f"Genome-NIAH: {data} does not exist")
    if parse_cell(data.name):
        return [(data.name, _split_files(data))]
    cells: list[tuple[str | None, list[Path]]] = []
    for root in (data, data / "data"):
        if root.is_dir():
            for sub in sorted(root.iterdir()):
                if sub.is_dir() and parse_cell(sub.name):
                    files = _split_files(sub)
                    if files:
                        cells.append((sub.name, files))
    if cells:
        return cells
    files = _split_files(data)
    if files:
        return [(None, files)]
    raise FileNotFoundError(
        f"Genome-NIAH: no cell folders (niah_4k, niah_neardup_d2_8k, ...) or data files under {data}"
    )


def _task_of_row(row: dict[str, Any]) -> str:
    """The task of a row from a file with no config name: its ``task`` column, else its uid."""
    task = row.get("task")
    if isinstance(task, str) and task:
        return task.removeprefix("niah_") if task != "niah" else task
    uid = str(row.get("uid", ""))
    m = re.search(r"neardup_d\d+", uid)
    return m.group(0) if m else "niah"


class GenomeNiah(Task):
    """Genome-NIAH (4 tasks x 6 contexts); headline: mean greedy exact match over all rows."""

    name = "niah"
    title = "Genome-NIAH"
    headline = "gen_exact_match"
    levels = ("token", "bp")
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
    #: fractions, from the report's Table 5 and Figure 5. The plain model names hold the YaRN runs
    #: (how Carbon is published) and, as ``gen_exact_match``, the report's headline: plain niah at
    #: 64k tokens (393 kbp), so compare it with a run restricted to that cell (``-O tasks=niah
    #: -O ctx=64k -O with_yarn=true``); "native" holds the runs without YaRN.
    reference: ClassVar[dict[str, dict[str, float]]] = {
        "Carbon-3B": {
            "gen_exact_match": 0.79,
            "niah_16k.gen_exact_match": 0.91,
            "niah_32k.gen_exact_match": 0.90,
            "niah_64k.gen_exact_match": 0.79,
            "niah_128k.gen_exact_match": 0.27,
            "niah_neardup_d4_32k.gen_exact_match": 0.78,
            "niah_neardup_d4_64k.gen_exact_match": 0.64,
            "niah_neardup_d4_128k.gen_exact_match": 0.23,
            "niah_neardup_d2_32k.gen_exact_match": 0.34,
            "niah_neardup_d2_64k.gen_exact_match": 0.26,
            "niah_neardup_d2_128k.gen_exact_match": 0.09,
        },
        "Carbon-8B": {
            "gen_exact_match": 0.86,
            "niah_16k.gen_exact_match": 0.89,
            "niah_32k.gen_exact_match": 0.87,
            "niah_64k.gen_exact_match": 0.86,
            "niah_128k.gen_exact_match": 0.65,
            "niah_neardup_d4_32k.gen_exact_match": 0.71,
            "niah_neardup_d4_64k.gen_exact_match": 0.69,
            "niah_neardup_d4_128k.gen_exact_match": 0.47,
            "niah_neardup_d2_32k.gen_exact_match": 0.26,
            "niah_neardup_d2_64k.gen_exact_match": 0.29,
            "niah_neardup_d2_128k.gen_exact_match": 0.22,
        },
        "Evo2-7B": {
            "gen_exact_match": 0.80,
            "niah_16k.gen_exact_match": 0.97,
            "niah_32k.gen_exact_match": 0.95,
            "niah_64k.gen_exact_match": 0.80,
            "niah_128k.gen_exact_match": 0.53,
        },
        "Carbon-3B native": {
            "niah_8k.gen_exact_match": 0.81,
            "niah_16k.gen_exact_match": 0.73,
            "niah_32k.gen_exact_match": 0.55,
            "niah_neardup_d4_8k.gen_exact_match": 0.68,
            "niah_neardup_d4_16k.gen_exact_match": 0.60,
            "niah_neardup_d4_32k.gen_exact_match": 0.44,
            "niah_neardup_d2_8k.gen_exact_match": 0.30,
            "niah_neardup_d2_16k.gen_exact_match": 0.30,
            "niah_neardup_d2_32k.gen_exact_match": 0.23,
        },
        "Carbon-8B native": {
            "niah_8k.gen_exact_match": 0.82,
            "niah_16k.gen_exact_match": 0.78,
            "niah_32k.gen_exact_match": 0.69,
            "niah_neardup_d4_8k.gen_exact_match": 0.69,
            "niah_neardup_d4_16k.gen_exact_match": 0.67,
            "niah_neardup_d4_32k.gen_exact_match": 0.57,
            "niah_neardup_d2_8k.gen_exact_match": 0.27,
            "niah_neardup_d2_16k.gen_exact_match": 0.28,
            "niah_neardup_d2_32k.gen_exact_match": 0.29,
        },
    }

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
            task = _task_of_row(r)
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
        n_prefix = len(_prefix_ids(carbon, prefix))
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
            return {
                "ll_pos": None,
                "ll_neg": None,
                "ll_correct": None,
                "ll_margin": None,
                "ll_note": "negative_sequence does not start with the prompt",
            }
        try:
            lp, ln = value_logliks(carbon, prompt, [pos, neg], level=level, prefix=prefix)  # type: ignore[arg-type]
        except (ValueError, RuntimeError) as exc:
            return {
                "ll_pos": None,
                "ll_neg": None,
                "ll_correct": None,
                "ll_margin": None,
                "ll_note": str(exc),
            }
        if not (math.isfinite(lp) and math.isfinite(ln)):
            return {
                "ll_pos": None,
                "ll_neg": None,
                "ll_correct": None,
                "ll_margin": None,
                "ll_note": "value has no whole 6-mer to score",
            }
        return {"ll_pos": lp, "ll_neg": ln, "ll_correct": int(lp > ln), "ll_margin": lp - ln}

    # ------------------------------------------------------------------ metrics
    def metrics(self, records: list[Record]) -> dict[str, float]:
        """Overall means and the same per cell (``niah_neardup_d2_8k.gen_exact_match``...).

        Rows that could not be generated (too long for the model...) are counted in ``n_errors``
        and left out of the means."""
        out = _summary(records)
        out["n_errors"] = float(sum(1 for r in records if r.get("error")))
        by_cell: dict[str, list[Record]] = defaultdict(list)
        for r in records:
            by_cell[str(r.get("config"))].append(r)
        for cell, rs in sorted(by_cell.items()):
            for key, value in _summary(rs).items():
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


def _summary(records: list[Record]) -> dict[str, float]:
    def mean(key: str) -> float:
        vals = [r[key] for r in records if r.get(key) is not None]
        return float(np.mean(vals)) if vals else float("nan")

    return {
        "n": float(len(records)),
        "gen_exact_match": mean("gen_exact_match"),
        "gen_base_accuracy": mean("gen_base_accuracy"),
        "ll_correct": mean("ll_correct"),
        "ll_margin": mean("ll_margin"),
    }


def plot_niah_heatmap(
    path: Path,
    values: dict[tuple[str, int], float],
    counts: dict[tuple[str, int], int] | None = None,
    *,
    title: str = "Genome-NIAH exact match",
) -> Path:
    """Write a (difficulty x context) heat-map of ``values[(task, ctx_tokens)]`` in [0, 1] as PNG."""
    from matplotlib.figure import Figure

    from hexamer.io import atomic_path

    tasks = [t for t in DIFFICULTIES if any(k[0] == t for k in values)]
    tasks += sorted({k[0] for k in values} - set(tasks))
    ctxs = sorted({k[1] for k in values})
    grid = np.full((len(tasks), len(ctxs)), np.nan)
    for (t, c), v in values.items():
        grid[tasks.index(t), ctxs.index(c)] = v
    fig = Figure(figsize=(1.3 * len(ctxs) + 2.5, 0.7 * len(tasks) + 1.8), layout="constrained")
    ax = fig.add_subplot()
    image = ax.imshow(np.ma.masked_invalid(grid), vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(ctxs)), [ctx_label(c) for c in ctxs])
    ax.set_yticks(range(len(tasks)), tasks)
    ax.set_xlabel("context (6-mer tokens)")
    ax.set_ylabel("task (difficulty)")
    for i in range(len(tasks)):
        for j in range(len(ctxs)):
            if np.isfinite(grid[i, j]):
                n = (counts or {}).get((tasks[i], ctxs[j]))
                label = f"{grid[i, j]:.2f}" + (f"\nn={n}" if n is not None else "")
                ax.text(
                    j,
                    i,
                    label,
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="black" if grid[i, j] > 0.6 else "white",
                )
    fig.colorbar(image, ax=ax, label="exact match")
    ax.set_title(title)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=150)
    return path
