"""Variant scoring at throughput: batching, shared reference windows and KV-cache prefix reuse.

The recipes are defined in :mod:`hexamer.vep.recipes`; this module computes the same numbers with
far fewer model tokens:

* **Window recipe.** All windows of one site (the ref window and every alt window of every
  record at that position) agree up to the 6-mer holding the first changed base. That shared
  prefix is run once, its KV cache copied to one row per window, and only the differing suffixes
  are run, batched across sites. Only the suffix's per-base log-probabilities enter the score:
  the prefix's are the same in every window and cancel in ``LL(alt) - LL(ref)``.
* **Next-base recipe.** Variants whose contexts start at the same base (same 6-mer phase, within
  one grid step, see :func:`~hexamer.vep.recipes.context_anchor`) are one group. Each site's
  context is then a prefix of the group's sequence (start to last site), so one causal forward over
  that sequence reads every site's next-base distribution at the position just before it; every
  ALT of a site uses the same logits. N variants in a cluster cost about one context forward plus
  the gaps between them instead of N context forwards.

Work is cut into *units* (a few sites or groups) that depend only on the input, never on what was
already done, so a resumed run recomputes exactly what an uninterrupted one computed and gets
bit-identical numbers. A unit that raises marks its rows ``failed``; the job goes on.
"""

from __future__ import annotations

import bisect
import os
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from hexamer.engine.batching import padded_chunks
from hexamer.fns import log_base_marginals
from hexamer.fns.tables import BASE_INDEX
from hexamer.model import KVCache
from hexamer.tokenizer.dna import encode_dna, encode_kmers
from hexamer.vep.recipes import (
    DEFAULT_CONTEXT,
    DEFAULT_CONTEXT_GRID,
    DEFAULT_WINDOW,
    RECIPES,
    NextBaseContext,
    WindowPair,
    bp_log_likelihood,
    context_anchor,
    context_start,
    leading_n,
    naive_next_base_scores,
    naive_window_score,
    non_acgt_positions,
    oov_bp,
    pair_oov_bp,
    reverse_complement,
    unscored_allele,
    variant_windows,
    window_bounds,
    window_pair_bounds,
    window_tokens,
)
from hexamer.vep.variants import Reference, Variant, VcfRecord, iter_data_lines, open_variant_file, read_vcf

if TYPE_CHECKING:
    from hexamer.carbon import Carbon

__all__ = [
    "ROW_COLUMNS",
    "STATUSES",
    "ContigRenameWarning",
    "SettingsFittedWarning",
    "VepSettings",
    "count_rows",
    "iter_record_blocks",
    "score_variants",
]

PathLike = str | os.PathLike[str]
Row = dict[str, Any]
Key = tuple[int, int]

#: Columns of a result row, in output order.
ROW_COLUMNS = (
    "record",
    "alt_index",
    "id",
    "chrom",
    "pos",
    "ref",
    "alt",
    "kind",
    "recipe",
    "score",
    "status",
    "reason",
    "n_scored_bp",
    "n_oov_bp",
)
#: ``ok`` scored; ``skipped`` not scorable by design (symbolic, unknown contig, kind the recipe
#: does not score, N alleles, variant bases inside an ``<oov>`` 6-mer, too long); ``ref_mismatch``
#: REF differs from the FASTA; ``failed`` malformed input or an error while scoring.
STATUSES = ("ok", "skipped", "ref_mismatch", "failed")


class ContigRenameWarning(UserWarning):
    """A VCF contig was matched to a differently spelled FASTA contig (``chr20`` -> ``20``)."""


class SettingsFittedWarning(UserWarning):
    """A window or context larger than the model's context was cut to fit it (old and new values)."""


#: the ``hexamer`` package folder: frames in it are not where a user called from
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _warn_at_caller(message: str, category: type[Warning]) -> None:
    """Warn at the first frame outside the package: the user's call of :func:`score_variants` or
    ``run_vep`` (or their loop over its rows), however deep inside hexamer the cause was found.
    A fixed ``stacklevel`` would point into hexamer on some of the paths that reach here."""
    level, frame = 2, sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR):
        level, frame = level + 1, frame.f_back
    warnings.warn(message, category, stacklevel=level if frame is not None else 2)


#: Default tokens per forward on CPU. Larger forwards lose more to activations that no longer fit
#: in cache than they gain from batching: 500M shape, 4 single-ALT SNVs, 8,192 bp windows, 2
#: threads: 41.9 s at 4,096 tokens vs 54.1 s at 16,384 (docs/benchmarks.md).
TOKEN_BUDGET_CPU = 4096


@dataclass(frozen=True)
class VepSettings:
    """Everything that decides the numbers (and the work units) of a run."""

    recipe: str = "window"
    window: int = DEFAULT_WINDOW
    #: window recipe: centre windows on ``window_grid``-bp tiles (1 = on each variant), see recipes
    window_grid: int = 1
    context: int = DEFAULT_CONTEXT
    context_grid: int = DEFAULT_CONTEXT_GRID
    rc_average: bool = False
    batch_size: int = 8
    #: tokens per forward; None = by device (:data:`TOKEN_BUDGET_CPU` on CPU, else 16,384)
    token_budget: int | None = None
    block_records: int = 50_000

    def checked(self, carbon: Carbon, *, on_note: Callable[[str], None] | None = None) -> VepSettings:
        """Validate against the model. A window or next-base context that does not fit the model
        is cut to fit, like ``hexamer eval`` does, and said so: ``on_note(message)`` with the old
        and new values (default: a :class:`SettingsFittedWarning`)."""

        def note(message: str) -> None:
            if on_note is not None:
                on_note(message)
            else:
                _warn_at_caller(message, SettingsFittedWarning)

        if self.recipe not in RECIPES:
            raise ValueError(f"recipe must be one of {', '.join(RECIPES)}, got {self.recipe!r}")
        if self.token_budget is None:
            model = getattr(carbon, "model", None)  # hexamer.remote has none: its units are per window
            on_cpu = model is None or model.device.type == "cpu"
            budget = TOKEN_BUDGET_CPU if on_cpu else 16384
            return replace(self, token_budget=budget).checked(carbon, on_note=on_note)
        for name in ("batch_size", "token_budget", "block_records"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        # a served model needs room for the one completion token of a prompt-logprobs request
        positions = getattr(carbon, "max_prompt_tokens", carbon.context_length)
        k = carbon.layout.k
        if self.recipe == "window":
            if self.window < 1:
                raise ValueError(f"window must be >= 1 bp, got {self.window}")
            if not 1 <= self.window_grid <= max(1, self.window // 2):
                raise ValueError(
                    f"window_grid must be between 1 (windows centred on each variant) and half the "
                    f"window ({self.window // 2} bp), got {self.window_grid}"
                )
            if window_tokens(self.window, k) > positions:
                fitted = k * (positions - 1)
                note(
                    f"window {self.window} bp -> {fitted} bp: a {self.window} bp window needs "
                    f"{window_tokens(self.window, k)} tokens, the model takes {positions}"
                )
                grid = min(self.window_grid, max(1, fitted // 2))
                if grid != self.window_grid:
                    note(f"window_grid {self.window_grid} bp -> {grid} bp (at most half the window)")
                return replace(self, window=fitted, window_grid=grid)
            return self
        if self.rc_average:
            raise ValueError("rc_average applies to the window recipe only (next_base reads left context)")
        if self.window_grid != 1:
            raise ValueError("window_grid applies to the window recipe only")
        ctx = NextBaseContext.for_model(self.context, self.context_grid, positions, k)
        if ctx.context < self.context - self.context % k:
            note(
                f"context {self.context} bp -> {ctx.context} bp: the model takes {positions} tokens "
                f"(at most {k * (positions - 1)} bp with the grid)"
            )
        if ctx.grid < max(k, self.context_grid - self.context_grid % k):
            note(f"context_grid {self.context_grid} bp -> {ctx.grid} bp so that every context fits the model")
        return VepSettings(**{**asdict(self), "context": ctx.context, "context_grid": ctx.grid})

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# --------------------------------------------------------------------------- rows


def _row(
    v: Variant,
    recipe: str,
    status: str,
    score: float | None = None,
    reason: str | None = None,
    *,
    n_scored_bp: int | None = None,
    n_oov_bp: int | None = None,
) -> Row:
    return {
        "record": v.record,
        "alt_index": v.alt_index,
        "id": v.id,
        "chrom": v.chrom,
        "pos": v.pos,
        "ref": v.ref,
        "alt": v.alt,
        "kind": v.kind,
        "recipe": recipe,
        "score": score,
        "status": status,
        "reason": reason,
        "n_scored_bp": n_scored_bp,
        "n_oov_bp": n_oov_bp,
    }


# --------------------------------------------------------------------------- planning


@dataclass
class _WindowSite:
    """Variants sharing one ref window ``[start, end)`` of a FASTA contig (sequences are fetched
    when the unit runs, so a planned block holds coordinates, not megabases of windows)."""

    contig: str
    start: int
    end: int
    members: list[Variant] = field(default_factory=list)

    def pairs(self, reference: Reference, window: int, grid: int, limit: int) -> list[WindowPair | None]:
        """Each member's ref and alt windows (:func:`~hexamer.vep.recipes.variant_windows`: an
        indel's windows reach up to its length difference beyond ``[start, end)``)."""
        length = reference.lengths[self.contig]
        reach = max(abs(len(v.alt) - len(v.ref)) for v in self.members)
        lo, hi = max(0, self.start - reach), min(length, self.end + reach)
        seq = reference.fetch(self.contig, lo, hi)

        def fetch(a: int, b: int) -> str:
            assert lo <= a <= b <= hi
            return seq[a - lo : b - lo]

        return [
            variant_windows(fetch, v.start, v.ref, v.alt, length, window, grid, limit) for v in self.members
        ]

    def n_windows(self) -> int:
        return 1 + len({(v.start, v.ref, v.alt) for v in self.members})

    def max_bases(self) -> int:
        return self.end - self.start + max(0, *(len(v.alt) - len(v.ref) for v in self.members))


@dataclass
class _NextBaseGroup:
    """Sites whose contexts start at the same base (so share a prefix), by position."""

    contig: str
    start: int
    sites: dict[int, list[Variant]] = field(default_factory=dict)  # p0 -> variants


@dataclass
class _Unit:
    """One deterministic piece of work and the variants whose rows it produces."""

    variants: list[Variant]
    run: Callable[[], list[Row]]

    @property
    def keys(self) -> list[Key]:
        return [v.key for v in self.variants]


class _Planner:
    """Turns a block of records into rows for what cannot be scored and units for the rest."""

    def __init__(
        self, carbon: Carbon, reference: Reference, settings: VepSettings, note: Callable[[str], None]
    ):
        self.carbon = carbon
        self.reference = reference
        self.s = settings
        assert settings.token_budget is not None, "plan with VepSettings.checked() settings"
        self.token_budget: int = settings.token_budget
        self.note = note
        self.k = carbon.layout.k
        self.positions: int = getattr(carbon, "max_prompt_tokens", carbon.context_length)
        #: the most bases a window may hold (``<dna>`` + whole k-mers within the model's context)
        self.limit = self.k * (self.positions - 1)
        self._noted: set[str] = set()
        self._lead: dict[tuple[str, int], tuple[int, int]] = {}

    def plan(self, block: list[VcfRecord]) -> tuple[list[Row], list[Variant]]:
        rows: list[Row] = []
        scorable: list[Variant] = []
        recipe = self.s.recipe
        for rec in block:
            ref_check: dict[str, str | None] = {}
            for v in rec.variants():
                if v.error is not None:
                    rows.append(_row(v, recipe, "failed", reason=v.error))
                    continue
                if v.skip is not None:
                    rows.append(_row(v, recipe, "skipped", reason=v.skip))
                    continue
                contig, message = self.reference.resolve(v.chrom)
                if contig is None:
                    rows.append(_row(v, recipe, "skipped", reason=message))
                    continue
                if message is not None and v.chrom not in self._noted:
                    self._noted.add(v.chrom)
                    self.note(message)
                if contig not in ref_check:
                    ref_check[contig] = self._ref_problem(v, contig)
                if ref_check[contig] is not None:
                    rows.append(_row(v, recipe, "ref_mismatch", reason=ref_check[contig]))
                    continue
                skip = self._recipe_skip(v, contig)
                if skip is not None:
                    rows.append(_row(v, recipe, "skipped", reason=skip))
                    continue
                scorable.append(v)
        return rows, scorable

    def _ref_problem(self, v: Variant, contig: str) -> str | None:
        length = self.reference.lengths[contig]
        end = v.start + len(v.ref)
        if end > length:
            return (
                f"REF {v.ref} at {v.chrom}:{v.pos} runs past the end of FASTA contig {contig!r} ({length} bp)"
            )
        found = self.reference.fetch(contig, v.start, end)
        if found != v.ref:
            return f"REF {v.ref} at {v.chrom}:{v.pos} does not match the FASTA ({found})"
        return None

    def _recipe_skip(self, v: Variant, contig: str) -> str | None:
        if "N" in v.ref or "N" in v.alt:
            return "allele contains N: its 6-mer would be <oov> and its bases not scored"
        if self.s.recipe == "next_base":
            if v.kind != "SNV":
                return f"the next_base recipe scores SNVs only (this is a {v.kind})"
            return None
        length = self.reference.lengths[contig]
        if window_tokens(max(len(v.ref), len(v.alt)), self.k) > self.positions:
            return f"its allele needs more tokens than the model's context of {self.positions}"
        spans = window_pair_bounds(
            v.start, len(v.ref), len(v.alt), length, self.s.window, self.s.window_grid, self.limit
        )
        if spans is None:
            return (
                f"contig {contig!r} ({length} bp) is too short to give this indel's ref and alt windows "
                "the same number of bases"
            )
        return None

    # ---------------------------------------------------------------- units

    def units(self, scorable: list[Variant], runner: _Runner) -> list[_Unit]:
        if self.s.recipe == "window":
            return self._window_units(scorable, runner)
        return self._next_base_units(scorable, runner)

    def _window_units(self, scorable: list[Variant], runner: _Runner) -> list[_Unit]:
        sites: dict[tuple[str, int, int], _WindowSite] = {}
        for v in scorable:
            contig, _ = self.reference.resolve(v.chrom)
            assert contig is not None
            start, end = window_bounds(
                v.start, len(v.ref), self.reference.lengths[contig], self.s.window, self.s.window_grid
            )
            site = sites.get((contig, start, end))
            if site is None:
                site = sites[(contig, start, end)] = _WindowSite(contig, start, end)
            site.members.append(v)
        order = self.reference.order
        ordered = [sites[key] for key in sorted(sites, key=lambda c: (order[c[0]], c[1], c[2]))]
        strands = 2 if self.s.rc_average else 1
        units: list[_Unit] = []
        batch: list[_WindowSite] = []
        rows = 0
        for site in ordered:
            n = strands * site.n_windows()
            tokens = window_tokens(site.max_bases(), self.k)
            if batch and (rows + n > self.s.batch_size or (rows + n) * tokens > self.token_budget):
                units.append(self._window_unit(batch, runner))
                batch, rows = [], 0
            batch.append(site)
            rows += n
        if batch:
            units.append(self._window_unit(batch, runner))
        return units

    def _window_unit(self, sites: list[_WindowSite], runner: _Runner) -> _Unit:
        return _Unit([v for site in sites for v in site.members], lambda: runner.window(sites))

    def _next_base_units(self, scorable: list[Variant], runner: _Runner) -> list[_Unit]:
        groups: dict[tuple[str, int], _NextBaseGroup] = {}
        for v in scorable:
            contig, _ = self.reference.resolve(v.chrom)
            assert contig is not None
            anchor = context_anchor(v.start, self.s.context, self.s.context_grid, self.k)
            start = context_start(anchor, v.start, self._leading_n(contig, anchor, v.start), self.k)
            group = groups.get((contig, start))
            if group is None:
                group = groups[(contig, start)] = _NextBaseGroup(contig, start)
            group.sites.setdefault(v.start, []).append(v)
        order = self.reference.order
        ordered = [groups[key] for key in sorted(groups, key=lambda c: (order[c[0]], c[1]))]
        units = [
            self._next_base_unit(ordered[i : i + self.s.batch_size], runner)
            for i in range(0, len(ordered), self.s.batch_size)
        ]
        return units

    def _leading_n(self, contig: str, anchor: int, p0: int) -> int:
        """N bases at the anchor, counted up to ``p0`` (cached per anchor; most anchors have none)."""
        key = (contig, anchor)
        hit = self._lead.get(key)
        if hit is not None:
            n, upto = hit
            if n < upto - anchor or upto >= p0:  # the run ended before `upto`, or `upto` covers p0
                return min(n, p0 - anchor)
        if anchor >= p0 or self.reference.fetch(contig, anchor, anchor + 1) != "N":
            n = 0
        else:
            n = leading_n(self.reference.fetch(contig, anchor, p0))
        self._lead[key] = (n, p0)
        return n

    def _next_base_unit(self, groups: list[_NextBaseGroup], runner: _Runner) -> _Unit:
        variants = [v for g in groups for p in sorted(g.sites) for v in g.sites[p]]
        return _Unit(variants, lambda: runner.next_base(groups))


# --------------------------------------------------------------------------- compute


class _Runner:
    """Model work for the units: the fast engine, or the naive recipe (``naive=True``)."""

    def __init__(self, carbon: Carbon, reference: Reference, settings: VepSettings, naive: bool) -> None:
        self.carbon = carbon
        self.reference = reference
        self.s = settings
        remote = getattr(carbon, "is_remote", False)  # hexamer.remote: per-window/per-site calls only
        self.naive = naive or remote
        self.layout = carbon.layout
        self.device = torch.device("cpu") if remote else carbon.model.device
        self.rows = (self.layout.kmer_start, self.layout.kmer_stop)
        positions = getattr(carbon, "max_prompt_tokens", carbon.context_length)
        self.limit = self.layout.k * (positions - 1)
        #: group sequences fetched by next_base_logprobs, reused to count their <oov> bases
        self._group_seqs: dict[tuple[str, int, int], str] = {}

    # ------------------------------------------------------------ window
    def window(self, sites: list[_WindowSite]) -> list[Row]:
        recipe, rc, k = self.s.recipe, self.s.rc_average, self.layout.k
        out: list[Row] = []
        todo: list[tuple[int, Variant, WindowPair, int]] = []  # (site, variant, windows, oov bases)
        for si, site in enumerate(sites):
            pairs = site.pairs(self.reference, self.s.window, self.s.window_grid, self.limit)
            for v, pair in zip(site.members, pairs, strict=True):
                if pair is None:  # the planner skips these; kept for callers that bypass it
                    out.append(_row(v, recipe, "skipped", reason="contig too short for equal-length windows"))
                    continue
                n_oov = pair_oov_bp(pair, rc_average=rc, k=k)
                counts = {"n_scored_bp": len(pair.ref) - n_oov, "n_oov_bp": n_oov}
                reason = unscored_allele(pair, rc_average=rc, k=k)
                if reason is not None:
                    out.append(_row(v, recipe, "skipped", reason=reason, **counts))
                else:
                    todo.append((si, v, pair, n_oov))
        if not todo:
            return out

        def ok(v: Variant, pair: WindowPair, n_oov: int, score: float) -> Row:
            return _row(v, recipe, "ok", score, n_scored_bp=len(pair.ref) - n_oov, n_oov_bp=n_oov)

        if self.naive:
            prefetch = getattr(self.carbon, "prefetch_windows", None)  # remote: all windows concurrently
            if prefetch is not None:
                flips = [reverse_complement] if rc else []
                prefetch([f(x) for _, _, p, _ in todo for x in (p.ref, p.alt) for f in [str, *flips]])
            for _, v, pair, n_oov in todo:
                out.append(
                    ok(v, pair, n_oov, naive_window_score(self.carbon, pair.ref, pair.alt, rc_average=rc))
                )
            return out
        strands = [lambda x: x, reverse_complement] if rc else [lambda x: x]
        by_site: dict[int, list[tuple[Variant, WindowPair, int]]] = {}
        for si, v, pair, n_oov in todo:
            by_site.setdefault(si, []).append((v, pair, n_oov))
        groups: list[list[str]] = []
        for members in by_site.values():
            strings = list(dict.fromkeys(x for _, p, _ in members for x in (p.ref, p.alt)))
            groups.extend([[flip(x) for x in strings] for flip in strands])
        sums = self.shared_prefix_sums(groups)
        g = 0
        for members in by_site.values():
            tables = []
            for flip in strands:
                tables.append((flip, dict(zip(groups[g], sums[g], strict=True))))
                g += 1
            for v, pair, n_oov in members:
                deltas = [table[flip(pair.alt)] - table[flip(pair.ref)] for flip, table in tables]
                out.append(ok(v, pair, n_oov, sum(deltas) / len(deltas)))
        return out

    @torch.inference_mode()
    def shared_prefix_sums(self, groups: Sequence[Sequence[str]]) -> list[list[float]]:
        """For each group of DNA strings, the float64 sum of per-base FNS log-probabilities of each
        string *after* the tokens all strings of the group share.

        The shared tokens are run once per group (their per-base terms are equal in every string and
        left out); the KV cache of that prefix is copied to one row per string and the suffixes run
        in forwards of at most ``batch_size`` rows and ``token_budget`` padded tokens.
        """
        lay = self.layout
        encs = [[encode_dna(x, lay) for x in g] for g in groups]
        shared: list[int] = []
        for g in encs:
            n = min(len(e.ids) for e in g)
            t0 = n
            for e in g[1:]:
                diff = np.flatnonzero((e.ids[:n] != g[0].ids[:n]) | (e.n_real[:n] != g[0].n_real[:n]))
                if diff.size:
                    t0 = min(t0, int(diff[0]))
            shared.append(t0)
        after = {(gi, si): len(e.ids) - shared[gi] for gi, g in enumerate(encs) for si, e in enumerate(g)}
        p_max = max(1 + t for t in shared)
        cache = KVCache.for_model(self.carbon.model, len(groups), p_max)
        prefixes = [(gi, [lay.begin_id, *g[0].ids[: shared[gi]].tolist()]) for gi, g in enumerate(encs)]
        first = torch.stack(self._prefill(cache, prefixes))  # (G, 4**k): predicts token shared[g]
        result: list[list[float]] = [[0.0] * len(g) for g in encs]  # no token after the prefix: 0

        def bp_sum(gi: int, si: int, pred: torch.Tensor) -> None:
            e = encs[gi][si]
            result[gi][si] = self._bp_sum(pred, e.ids[shared[gi] :], e.n_real[shared[gi] :])

        for (gi, si), m in after.items():
            if m == 1:  # one token after the prefix: its logits are `first`
                bp_sum(gi, si, first[gi : gi + 1])
        # strings with at least two tokens after the prefix run their tail (all but the last token)
        suffix = [key for key, m in after.items() if m >= 2]
        for chunk in padded_chunks(
            suffix,
            [after[key] - 1 for key in suffix],
            token_budget=self.s.token_budget,
            max_rows=self.s.batch_size,
        ):
            s_max = max(after[key] - 1 for key in chunk)
            rows_cache = _copy_rows(self.carbon, cache, torch.tensor([gi for gi, _ in chunk]), p_max + s_max)
            ids = torch.full((len(chunk), s_max), self._pad, dtype=torch.int64)
            mask = torch.zeros((len(chunk), s_max), dtype=torch.bool)
            for r, (gi, si) in enumerate(chunk):
                tail = encs[gi][si].ids[shared[gi] : -1]
                ids[r, : len(tail)] = torch.from_numpy(tail)
                mask[r, : len(tail)] = True
            logits = self.carbon.model(
                ids.to(self.device),
                kv_cache=rows_cache,
                attention_mask=None if bool(mask.all()) else mask.to(self.device),
                logits_at="all",
                vocab_rows=self.rows,
            ).logits
            assert logits is not None
            for r, (gi, si) in enumerate(chunk):
                bp_sum(gi, si, torch.cat([first[gi : gi + 1], logits[r, : after[gi, si] - 1]]))
        return result

    @property
    def _pad(self) -> int:
        return self.carbon.tokenizer.pad_token_id or 0

    def _bp_sum(self, pred: torch.Tensor, ids: np.ndarray, n_real: np.ndarray) -> float:
        return bp_log_likelihood(pred, ids - self.layout.kmer_start, n_real)

    # ------------------------------------------------------------ next base
    def next_base(self, groups: list[_NextBaseGroup]) -> list[Row]:
        recipe = self.s.recipe
        out: list[Row] = []
        if self.naive:
            prefetch = getattr(self.carbon, "prefetch_next_base", None)  # remote: all sites concurrently
            if prefetch is not None:
                prefetch([self.reference.fetch(g.contig, g.start, p0) for g in groups for p0 in g.sites])
            for g in groups:
                for p0 in sorted(g.sites):
                    ctx = self.reference.fetch(g.contig, g.start, p0)
                    n_oov = oov_bp(ctx, self.layout.k)
                    counts = {"n_scored_bp": len(ctx) - n_oov, "n_oov_bp": n_oov}
                    for v in g.sites[p0]:
                        (score,) = naive_next_base_scores(self.carbon, ctx, v.ref, [v.alt])
                        out.append(_row(v, recipe, "ok", score, **counts))
            return out
        firsts = self.next_base_logprobs(groups)
        for g, per_site in zip(groups, firsts, strict=True):
            oov = self._context_oov(g)
            for p0, lp in zip(sorted(g.sites), per_site, strict=True):
                counts = {"n_scored_bp": p0 - g.start - oov[p0], "n_oov_bp": oov[p0]}
                for v in g.sites[p0]:
                    score = float(lp[BASE_INDEX[v.ref]] - lp[BASE_INDEX[v.alt]])
                    out.append(_row(v, recipe, "ok", score, **counts))
        return out

    def _context_oov(self, g: _NextBaseGroup) -> dict[int, int]:
        """``<oov>`` bases of each site's context ``[g.start, p0)`` (whole k-mers: sites sit on the
        group's k-mer grid), from one scan of the group's sequence."""
        k = self.layout.k
        last = max(g.sites)
        seq = self._group_seqs.pop((g.contig, g.start, last), None)  # left by next_base_logprobs
        if seq is None:
            seq = self.reference.fetch(g.contig, g.start, last)
        chunks = sorted({i // k for i in non_acgt_positions(seq)})
        return {p0: k * bisect.bisect_left(chunks, (p0 - g.start) // k) for p0 in g.sites}

    @torch.inference_mode()
    def next_base_logprobs(self, groups: Sequence[_NextBaseGroup]) -> list[list[torch.Tensor]]:
        """Per group, per site (ascending): float64 ``log P_0(b)`` (ATCG order) of the base at the site.

        Every site's context is a prefix of the group's sequence ``[start, last site)``, so one
        causal forward over that sequence holds them all: the hidden state just before site j sees
        exactly site j's context. The logits are computed at those positions only. (Prefilling a
        ``KVCache`` with the first context and feeding the gaps site by site gives the same numbers
        and the same token count, but every step then attends through an explicit mask and batched
        steps are padded to the longest gap: it measured 2-3x slower on CPU.)
        """
        lay = self.layout
        model = self.carbon.model
        result: list[list[torch.Tensor]] = []
        self._group_seqs = {}
        for g in groups:
            positions = sorted(g.sites)
            seq = self.reference.fetch(g.contig, g.start, positions[-1])
            self._group_seqs[(g.contig, g.start, positions[-1])] = seq
            ids = torch.tensor([[lay.begin_id, *encode_kmers(seq, lay).tolist()]], device=self.device)
            hidden = model(ids, logits_at="none", return_hidden=True).hidden
            assert hidden is not None
            at = torch.tensor([(p - g.start) // lay.k for p in positions], device=self.device)
            logits = model.compute_logits(hidden[0, at], self.rows)
            result.append(self._first_base(logits))
        return result

    @staticmethod
    def _first_base(logits: torch.Tensor) -> list[torch.Tensor]:
        return list(log_base_marginals(logits.double())[:, 0].cpu())

    def _prefill(self, cache: KVCache, rows: list[tuple[int, list[int]]]) -> list[torch.Tensor]:
        """Fill empty cache rows; rows of equal length share a forward (no padding, so attention
        takes its plain causal path). Returns each row's last-position logits, in ``rows`` order."""
        by_len: dict[int, list[int]] = {}
        for i, (_, ids) in enumerate(rows):
            by_len.setdefault(len(ids), []).append(i)
        out: list[torch.Tensor | None] = [None] * len(rows)
        for members in by_len.values():
            logits = self._batch_forward(cache, [rows[i] for i in members])
            for i, row in zip(members, logits, strict=True):
                out[i] = row
        return [x for x in out if x is not None]

    def _batch_forward(self, cache: KVCache, rows: list[tuple[int, list[int]]]) -> torch.Tensor:
        """Append each ``(cache row, ids)`` to its row (right-padded); ``(B, 4**k)`` last-token logits."""
        width = max(len(ids) for _, ids in rows)
        ids = torch.full((len(rows), width), self._pad, dtype=torch.int64)
        mask = torch.zeros((len(rows), width), dtype=torch.bool)
        for r, (_, seq) in enumerate(rows):
            ids[r, : len(seq)] = torch.tensor(seq)
            mask[r, : len(seq)] = True
        last = torch.tensor([len(seq) - 1 for _, seq in rows])
        cache_rows = [gi for gi, _ in rows]
        logits = self.carbon.model(
            ids.to(self.device),
            kv_cache=cache,
            attention_mask=None if bool(mask.all()) else mask.to(self.device),
            cache_rows=None if cache_rows == list(range(cache.batch_size)) else cache_rows,
            logits_at=last.to(self.device),
            vocab_rows=self.rows,
        ).logits
        assert logits is not None
        return logits


def _copy_rows(carbon: Carbon, cache: KVCache, src: torch.Tensor, max_len: int) -> KVCache:
    """A new ``max_len`` cache whose row i starts as a copy of ``cache`` row ``src[i]`` (the
    shared prefix per string)."""
    out = KVCache.for_model(carbon.model, len(src), max_len)
    dev = src.to(cache.device)
    n = cache.max_len
    for layer in range(len(cache.k)):
        out.k[layer][:, :, :n].copy_(cache.k[layer].index_select(0, dev))
        out.v[layer][:, :, :n].copy_(cache.v[layer].index_select(0, dev))
    out.valid[:, :n].copy_(cache.valid.index_select(0, dev))
    out.lengths.copy_(cache.lengths.index_select(0, src.cpu()))
    return out


# --------------------------------------------------------------------------- driving


def _blocks(records: Iterator[VcfRecord], size: int) -> Iterator[list[VcfRecord]]:
    block: list[VcfRecord] = []
    for rec in records:
        block.append(rec)
        if len(block) == size:
            yield block
            block = []
    if block:
        yield block


def _default_note(message: str) -> None:
    _warn_at_caller(message, ContigRenameWarning)


def iter_blocks(
    carbon: Carbon,
    vcf: PathLike,
    reference: Reference,
    settings: VepSettings,
    *,
    done: Mapping[Key, Row] | None = None,
    naive: bool = False,
    on_progress: Callable[[int], None] | None = None,
    on_note: Callable[[str], None] | None = None,
) -> Iterator[Iterator[list[Row]]]:
    """Per block of input records, an iterator over the row lists of its units (the resume layer's
    view). A unit whose every key is in ``done`` is not recomputed: its rows come from ``done``.
    The VCF header is read now, so a bad file raises here."""
    settings = settings.checked(carbon, on_note=on_note)
    records = read_vcf(vcf)
    return iter_record_blocks(
        carbon, records, reference, settings, done=done, naive=naive, on_progress=on_progress, on_note=on_note
    )


def iter_record_blocks(
    carbon: Carbon,
    records: Iterable[VcfRecord],
    reference: Reference,
    settings: VepSettings,
    *,
    done: Mapping[Key, Row] | None = None,
    naive: bool = False,
    on_progress: Callable[[int], None] | None = None,
    on_note: Callable[[str], None] | None = None,
) -> Iterator[Iterator[list[Row]]]:
    """:func:`iter_blocks` over records already read (their ``index`` is their record number in
    the whole input): a shard of a VCF scored elsewhere gets the blocks, work units and numbers
    of a run over the whole file when it starts on a block boundary (a multiple of
    ``settings.block_records`` records)."""
    settings = settings.checked(carbon, on_note=on_note)
    planner = _Planner(carbon, reference, settings, on_note or _default_note)
    runner = _Runner(carbon, reference, settings, naive)
    return (
        _block_units(planner, runner, b, done, on_progress)
        for b in _blocks(iter(records), settings.block_records)
    )


def _block_units(
    planner: _Planner,
    runner: _Runner,
    block: list[VcfRecord],
    done: Mapping[Key, Row] | None,
    on_progress: Callable[[int], None] | None,
) -> Iterator[list[Row]]:
    rows, scorable = planner.plan(block)
    if rows:
        if on_progress is not None:
            on_progress(len(rows))
        yield rows
    for unit in planner.units(scorable, runner):
        if done is not None and all(key in done for key in unit.keys):
            rows = [done[key] for key in unit.keys]
        else:
            try:
                rows = unit.run()
            except Exception as exc:  # one unit's failure must not end the job
                reason = f"scoring failed: {type(exc).__name__}: {exc}"
                rows = [_row(v, planner.s.recipe, "failed", reason=reason) for v in unit.variants]
        if on_progress is not None:
            on_progress(len(rows))
        yield rows


def score_variants(
    carbon: Carbon,
    vcf: PathLike,
    fasta: PathLike,
    *,
    recipe: str = "window",
    window: int = DEFAULT_WINDOW,
    window_grid: int = 1,
    context: int = DEFAULT_CONTEXT,
    context_grid: int = DEFAULT_CONTEXT_GRID,
    rc_average: bool = False,
    batch_size: int = 8,
    token_budget: int | None = None,
    block_records: int = 50_000,
    naive: bool = False,
    on_progress: Callable[[int], None] | None = None,
    on_note: Callable[[str], None] | None = None,
    renames: PathLike | Mapping[str, str] | None = None,
) -> Iterator[Row]:
    """Score every ALT allele of every record of a VCF/BCF against a reference FASTA.

    Yields one row per (record, ALT) in input order, for every input record (malformed, symbolic,
    mismatching ones included), with the columns :data:`ROW_COLUMNS`; ``status`` is one of
    :data:`STATUSES` and ``reason`` says why a row was not scored. Scores: window recipe
    ``LL(alt) - LL(ref)`` over windows of equal length, next-base ``log P(ref) - log P(alt)``
    (definitions in :mod:`hexamer.vep.recipes`); a variant whose bases share a 6-mer with an
    ``N`` is ``skipped``. ``n_scored_bp``/``n_oov_bp``: bases of the windows (or context) scored
    and lost to ``<oov>`` 6-mers. A window or context too long for the model is cut to fit, with
    a note. ``naive=True`` computes the same scores the slow, obvious way (one
    full forward per window or per ALT), for tests and benchmarks. ``on_progress(n)`` is called
    with the number of rows each finished unit produced; ``on_note(message)`` receives notes such
    as contig renames (default: a :class:`ContigRenameWarning`). ``renames`` maps VCF contig
    names to FASTA ones (a bcftools ``--rename-chrs`` file or a dict). A bad file raises at the call.
    """
    settings = VepSettings(
        recipe=recipe,
        window=window,
        window_grid=window_grid,
        context=context,
        context_grid=context_grid,
        rc_average=rc_average,
        batch_size=batch_size,
        token_budget=token_budget,
        block_records=block_records,
    ).checked(carbon, on_note=on_note)
    reference = Reference(fasta, renames=renames)
    try:
        blocks = iter_blocks(
            carbon, vcf, reference, settings, naive=naive, on_progress=on_progress, on_note=on_note
        )
    except BaseException:
        reference.close()
        raise
    return _ordered_rows(blocks, reference)


def count_rows(vcf: PathLike) -> int:
    """How many rows :func:`score_variants` yields for ``vcf`` (one per ALT; one for a record
    without ALT or a malformed line), counted without parsing records: the total of a progress
    bar. A text VCF is read line by line (about a second per million lines); a BCF with pysam."""
    path = os.fspath(vcf)
    with open(path, "rb") as f:
        is_bcf = f.read(3) == b"BCF" or (path.lower().endswith(".bcf"))
    if is_bcf:
        with open_variant_file(path) as source:
            return sum(max(1, len(rec.alts or ())) for rec in source)
    n = 0
    for line in iter_data_lines(path):
        if not line.strip():
            continue
        fields = line.split(b"\t", 5)
        n += fields[4].count(b",") + 1 if len(fields) > 5 else 1
    return n


def _ordered_rows(blocks: Iterator[Iterator[list[Row]]], reference: Reference) -> Iterator[Row]:
    with reference:
        for units in blocks:
            rows = [row for unit in units for row in unit]
            rows.sort(key=lambda r: (r["record"], r["alt_index"]))
            yield from rows
