"""BRCA2 and TraitGym Mendelian: window-likelihood variant-effect prediction (``evals.md`` §2).

Each row carries its own 8,192 bp reference window (``ref_seq``) and the same window with the variant
base replaced (``var_seq``). Every distinct window is scored once with :func:`sequence_loglik` (mean
log-likelihood; token level: full-vocabulary softmax, the published headline; bp level: FNS), and

    delta = LL(var_seq) - LL(ref_seq)          (with rev-comp averaging, the mean of the forward
                                                delta and the reverse-complemented windows' delta)

The ranking score is ``-delta`` (a larger drop in likelihood = more likely LOF / causal). Rows with
``class`` LOF (positive) or FUNC/INT (negative) enter the metrics; others are scored but not counted.

A model whose context cannot hold the windows (e.g. the tiny demo model) gets windows cropped
around the variant to the largest length it can take, and the report says so; with ``window=N``
any model can be evaluated on N-bp windows (the published number is for the full 8,192 bp).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from hexamer.evals.data import variant_example
from hexamer.evals.metrics import auprc_trapezoid, auroc, by_group_weighted, spearman
from hexamer.evals.published import published_reference
from hexamer.evals.scoring import sequence_loglik
from hexamer.evals.task import EvalContext, Example, Record, roc_pr_plots
from hexamer.evals.tasks.variant_table import VariantTableTask
from hexamer.io import reverse_complement

__all__ = ["Brca2", "TraitGymMendelian", "WindowVepTask", "crop_windows", "variant_index"]

POSITIVE, NEGATIVE = "LOF", "FUNC/INT"


def variant_index(ref_seq: str, var_seq: str) -> int:
    """0-based index of the variant in the window: where the two windows differ (the centre if equal)."""
    if len(ref_seq) == len(var_seq):
        diff = np.flatnonzero(
            np.frombuffer(ref_seq.encode("ascii", "replace"), np.uint8)
            != np.frombuffer(var_seq.encode("ascii", "replace"), np.uint8)
        )
        if diff.size:
            return int(diff[0])
    return len(ref_seq) // 2


def crop_windows(ref_seq: str, var_seq: str, window: int) -> tuple[str, str]:
    """Both windows cut to ``window`` bp with the variant at ``window // 2`` (as the published
    windows are built), shifted inwards where the window would leave the sequence."""
    if window >= len(ref_seq) and window >= len(var_seq):
        return ref_seq, var_seq
    at = variant_index(ref_seq, var_seq)
    start = max(0, min(at - window // 2, len(ref_seq) - window))
    return ref_seq[start : start + window], var_seq[start : start + window]


def _public_files(folder: str, file: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``file_names`` and ``data_candidates`` of a dataset that is one ``file`` in a Hub ``folder``:
    ``--data`` is that folder or the file; ``--data-root`` holds the folder, or the file itself."""
    return (file, f"{folder}/{file}"), (f"{folder}/{file}", folder, file)


def _key(seq: str) -> str:
    return hashlib.sha1(seq.encode()).hexdigest()


def _float_or_none(value: Any) -> float | None:
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if np.isfinite(f) else None


class WindowVepTask(VariantTableTask):
    """Shared loading, scoring and metrics of the two window-likelihood VEP tasks."""

    group_columns: ClassVar[tuple[str, ...]] = ()
    expected_columns: ClassVar[dict[str, str]] = {
        "chrom": "chromosome (int or str, no 'chr')",
        "pos": "1-based position",
        "ref": "reference base",
        "alt": "alternate base",
        "class": "LOF (positive) or FUNC/INT (negative); other values are not counted",
        "ref_seq": "reference window (8,192 bp, variant at index 4096)",
        "var_seq": "ref_seq with the variant base replaced by alt",
        "score": "optional: functional score (Spearman against delta)",
    }
    summary_keys: ClassVar[dict[str, str]] = {
        "n": "num_variants",
        "n_class_labeled": "num_class_labeled",
        "auroc": "AUROC",
        "auprc": "AUPRC",
        "auroc_by_chrom_weighted": "AUROC_by_chrom_weighted",
        "auprc_by_chrom_weighted": "AUPRC_by_chrom_weighted",
        "spearman_score_vs_delta": "Spearman_score_vs_delta",
    }

    def load(self, data: Path, *, limit: int | None = None, seed: int = 0) -> list[Example]:
        rows = self.read_variants(
            self.table_path(data),
            required=["class", "ref_seq", "var_seq"],
            optional=["score", *self.group_columns],
            limit=limit,
            seed=seed,
        )
        return [
            {
                **variant_example(r, chrom=str(r["chrom"])),
                "class": r["class"],
                "y": 1 if r["class"] == POSITIVE else 0 if r["class"] == NEGATIVE else None,
                "score": _float_or_none(r.get("score")),
                **{c: r.get(c) for c in self.group_columns},
                "ref_seq": r["ref_seq"],
                "var_seq": r["var_seq"],
            }
            for r in rows
        ]

    def _window(self, ctx: EvalContext, examples: list[Example]) -> int | None:
        """The crop length: the ``window`` option, or what fits the model when the windows do not."""
        fits = ctx.dna_fits()
        asked = ctx.options.get("window")
        longest = max((len(e["ref_seq"]) for e in examples if isinstance(e["ref_seq"], str)), default=0)
        if asked is not None:
            asked = int(asked)
            if asked > fits:
                ctx.notes.append(f"window {asked} bp does not fit the model's context; cropped to {fits} bp")
                return fits
            return asked
        if longest > fits:
            ctx.notes.append(
                f"windows cropped to {fits} bp around the variant to fit the model's context of "
                f"{ctx.carbon.context_length} tokens (published: the full {longest}-bp windows)"
            )
            return fits
        return None

    def score(self, examples: list[Example], ctx: EvalContext) -> Iterator[Record]:
        rc = bool(ctx.options.get("rev_comp_avg", self.default_options["rev_comp_avg"]))
        window = self._window(ctx, examples)
        ordered = sorted(examples, key=lambda e: _key(str(e["ref_seq"])))  # shared ref windows together
        memo: dict[str, float] = {}
        chunk = max(32, 8 * ctx.batch_size)
        for a in range(0, len(ordered), chunk):
            part = ordered[a : a + chunk]
            windows: list[tuple[Example, str, str] | tuple[Example, None, str]] = []
            todo: dict[str, str] = {}
            for e in part:
                ref_seq, var_seq = e["ref_seq"], e["var_seq"]
                if not isinstance(ref_seq, str) or not isinstance(var_seq, str) or not ref_seq or not var_seq:
                    windows.append((e, None, "ref_seq and var_seq must be non-empty strings"))
                    continue
                if window is not None:
                    ref_seq, var_seq = crop_windows(ref_seq, var_seq, window)
                windows.append((e, ref_seq, var_seq))
                seqs = [ref_seq, var_seq]
                if rc:
                    seqs += [reverse_complement(ref_seq), reverse_complement(var_seq)]
                for s in seqs:
                    h = _key(s)
                    if h not in memo:
                        todo[h] = s
            if todo:
                keys = list(todo)
                values = sequence_loglik(
                    ctx.carbon,
                    [todo[h] for h in keys],
                    level=ctx.level,
                    batch_size=ctx.batch_size,
                    on_error="nan",
                )
                memo.update(zip(keys, values.tolist(), strict=True))
            for e, ref_seq, var_seq in windows:
                yield self._record(e, ref_seq, var_seq, memo, rc)
            if len(memo) > 50_000:  # only neighbouring rows share windows (sorted by ref window)
                memo.clear()

    def _record(
        self, e: Example, ref_seq: str | None, var_seq: str, memo: dict[str, float], rc: bool
    ) -> Record:
        rec = self.variant_record(e, "class", "y", "score")
        rec.update({c: e.get(c) for c in self.group_columns})
        if ref_seq is None:
            rec["error"] = var_seq
            rec["delta"] = None
            return rec
        ref_ll, var_ll = memo[_key(ref_seq)], memo[_key(var_seq)]
        delta = var_ll - ref_ll
        if rc:
            rc_ref, rc_var = memo[_key(reverse_complement(ref_seq))], memo[_key(reverse_complement(var_seq))]
            rec["rc_ref_logp"], rec["rc_var_logp"] = rc_ref, rc_var
            delta = (delta + (rc_var - rc_ref)) / 2
        rec["ref_logp"], rec["var_logp"] = ref_ll, var_ll
        if not np.isfinite(delta):
            rec["error"] = "window could not be scored (too long for the model or no whole 6-mer)"
            rec["delta"] = None
        else:
            rec["delta"] = float(delta)
        return rec

    def metrics(self, records: list[Record]) -> dict[str, float]:
        ok = [r for r in records if r.get("y") is not None and r.get("delta") is not None]
        y = [r["y"] for r in ok]
        neg = [-r["delta"] for r in ok]
        chrom = [r["chrom"] for r in ok]
        scored = [
            (r["score"], r["delta"])
            for r in records
            if r.get("score") is not None and r.get("delta") is not None
        ]
        return {
            "n": float(len(records)),
            "n_class_labeled": float(len(ok)),
            "n_positive": float(sum(y)),
            "n_errors": float(sum(1 for r in records if r.get("error"))),
            "auroc": auroc(y, neg),
            "auprc": auprc_trapezoid(y, neg),
            "auroc_by_chrom_weighted": by_group_weighted(y, neg, chrom, "auroc"),
            "auprc_by_chrom_weighted": by_group_weighted(y, neg, chrom, "ap"),
            "spearman_score_vs_delta": spearman([s for s, _ in scored], [d for _, d in scored]),
        }

    def plots(self, records: list[Record], out_dir: Path) -> list[Path]:
        ok = [(r["y"], -r["delta"]) for r in records if r.get("y") is not None and r.get("delta") is not None]
        return roc_pr_plots(self, out_dir, ok, score="-delta", classes=f"{POSITIVE} vs {NEGATIVE}")


class Brca2(WindowVepTask):
    """BRCA2 saturation genome editing (Huang 2025), 6,836 SNVs on hg19 chr13; headline global AUROC."""

    name = "brca2"
    title = "BRCA2 VEP"
    headline = "auroc"
    default_options: ClassVar[dict[str, Any]] = {"rev_comp_avg": False, "window": None}
    file_names, data_candidates = _public_files("brca2-vep", "brca2_vep.parquet")
    group_columns = ("region",)
    reference: ClassVar[dict[str, dict[str, float]]] = published_reference("brca2")


class TraitGymMendelian(WindowVepTask):
    """TraitGym Mendelian traits, 3,380 SNVs (338 causal), hg38; headline by-chromosome weighted AUPRC."""

    name = "traitgym"
    title = "TraitGym Mendelian"
    headline = "auprc_by_chrom_weighted"
    default_options: ClassVar[dict[str, Any]] = {"rev_comp_avg": True, "window": None}
    file_names, data_candidates = _public_files("traitgym", "mendelian_traits_vep.parquet")
    group_columns = ("consequence",)
    reference: ClassVar[dict[str, dict[str, float]]] = published_reference("traitgym")
