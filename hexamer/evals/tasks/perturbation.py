"""Sequence-level perturbation tasks: triplet (CAG) expansion and synonymous codon replacement
(``evals.md`` §4).

Each row pairs a real coding sequence (``original_sequence``, the positive) with a perturbed copy of
the same length (``sequence``, the negative; older files call it ``input``):

* ``triplet`` (config ``motif_human``): a codon-aligned 30 bp block 60 bp after the first complete
  codon of a human CDS exon is overwritten with ``CAG`` x 10;
* ``codon`` (configs ``syn_human`` and ``syn_mouse``): every codon is replaced by the species' most
  frequent synonymous codon.

Both sequences are scored with :func:`~hexamer.evals.scoring.sequence_loglik` (mean log-likelihood;
token level = the published headline, bp level = FNS marginals), and a pair is **correct when
LL(original) > LL(perturbed)**: a tie counts as wrong, as in the published script (its comment says
otherwise and the older recipe used ``>=``). Accuracy is the mean over pairs.

The source does not say how ``syn_human`` and ``syn_mouse`` make the single "Synonymous codon"
number (the report counts one task of 20,000 pairs, human + mouse together). Here the headline is
the **pooled** accuracy over every pair of both subsets (each pair weighs the same, which is what
one combined set of pairs means); the per-species accuracies and their unweighted mean are reported
beside it. With equally sized subsets the pooled and the mean values coincide.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from hexamer.evals.data import ROW_INDEX, TABLE_SUFFIXES, read_rows, schema_error, table_columns
from hexamer.evals.published import published_reference
from hexamer.evals.scoring import sequence_loglik
from hexamer.evals.task import EvalContext, Example, Record, Task

__all__ = ["PerturbationTask", "SynonymousCodon", "TripletExpansion", "find_subset_files", "seq_hash"]

POSITIVE = "original_sequence"
NEGATIVES = ("sequence", "input")  # current name first; "input" in the older recipe


def seq_hash(seq: str) -> str:
    """First 16 hex characters of SHA-1 of the sequence (the published pos_hash / neg_hash)."""
    return hashlib.sha1(seq.encode()).hexdigest()[:16]


def _is_table(path: Path) -> bool:
    name = path.name.lower()
    for gz in (".gz", ".bz2"):
        name = name.removesuffix(gz)
    return any(name.endswith(s) for s in TABLE_SUFFIXES)


def _split_files(folder: Path) -> list[Path]:
    """The test split's files in a config folder: ``test-*``/``test.*`` shards (Hub layout), else
    every table file there (a folder holding one split)."""
    tables = sorted(p for p in folder.iterdir() if p.is_file() and _is_table(p))
    test = [p for p in tables if re.match(r"test([-_.]|$)", p.name)]
    return test or tables


def find_subset_files(data: Path, subset: str) -> list[Path]:
    """Files of one config (``motif_human``...) under ``data``: ``data/SUBSET/test-*.parquet`` (the
    Hub layout), ``data/data/SUBSET/...``, ``data/SUBSET.parquet``, or ``data`` itself when it is
    that config's folder or file. Empty when the config is not there."""
    if data.is_file():
        return [data]
    for folder in (data / subset, data / "data" / subset):
        if folder.is_dir():
            files = _split_files(folder)
            if files:
                return files
    for suffix in TABLE_SUFFIXES:
        if (data / f"{subset}{suffix}").is_file():
            return [data / f"{subset}{suffix}"]
    if data.name == subset and data.is_dir():
        return _split_files(data)
    return []


class PerturbationTask(Task):
    """Loading, pairwise scoring and accuracy shared by the perturbation tasks."""

    subsets: ClassVar[tuple[str, ...]] = ()
    headline = "accuracy"
    expected_columns: ClassVar[dict[str, str]] = {
        POSITIVE: "the real sequence (positive)",
        "sequence": "the perturbed sequence (negative); older files name it 'input'",
    }
    summary_keys: ClassVar[dict[str, str]] = {"accuracy": "accuracy", "n": "num_examples"}
    default_options: ClassVar[dict[str, Any]] = {"prefix": "<dna>", "subsets": "all"}
    data_candidates = ("perturbation-bench", "carbon-perturbation-bench", "carbon_tasks", "perturbation")

    def configure(self, options: Mapping[str, Any]) -> None:
        """``subsets``: evaluate only some configs (e.g. "syn_mouse"); "all" by default."""
        chosen = options.get("subsets", "all")
        if chosen is None or str(chosen).strip().lower() in ("", "all"):
            self._only = None
            return
        names = [
            str(c).strip() for c in (chosen if isinstance(chosen, list | tuple) else str(chosen).split(","))
        ]
        unknown = [n for n in names if n and n not in self.subsets]
        if unknown:
            raise ValueError(
                f"{self.name}: unknown subset(s) {', '.join(unknown)}; choose from {', '.join(self.subsets)}"
            )
        self._only = tuple(n for n in names if n)

    def load(self, data: Path, *, limit: int | None = None, seed: int = 0) -> list[Example]:
        """Rows of every subset found under ``data`` (``--limit N`` takes N rows of each subset,
        sampled like ``df.sample(N, random_state=seed)``)."""
        data = Path(data)
        if not data.exists():
            raise FileNotFoundError(f"{self.title}: {data} does not exist")
        subsets = getattr(self, "_only", None) or self.subsets
        found = {s: find_subset_files(data, s) for s in subsets}
        if data.is_file() or not any(found.values()):
            if data.is_dir() and not _split_files(data):
                wanted = ", ".join(f"{data}/{s}/test-*.parquet" for s in self.subsets)
                raise FileNotFoundError(f"{self.title}: no data under {data} (looked for {wanted})")
            files = [data] if data.is_file() else _split_files(data)
            found = {self._subset_of(data): files}
            if getattr(self, "_only", None) and next(iter(found)) not in subsets:
                return []
        out: list[Example] = []
        for subset, files in found.items():
            for path in files:
                rows = self._read(path, limit, seed)
                # a config split over several shards: the shard name keeps the ids unique
                tag = f"{subset}:{path.name}" if len(files) > 1 else subset
                for r in rows:
                    out.append(
                        {
                            "id": f"{tag}:{r[ROW_INDEX]}",
                            "subset": subset,
                            "row": r[ROW_INDEX],
                            "pos": r[POSITIVE],
                            "neg": r["_neg"],
                        }
                    )
        return out

    def _subset_of(self, path: Path) -> str:
        """The config a lone file/folder belongs to: a subset name in its path, else the first subset."""
        parts = [p.lower() for p in path.parts]
        for s in self.subsets:
            if any(s in p for p in parts):
                return s
        return self.subsets[0]

    def _read(self, path: Path, limit: int | None, seed: int) -> list[dict[str, Any]]:
        names = table_columns(path)
        negative = next((c for c in NEGATIVES if c in names), None)
        if POSITIVE not in names or negative is None:
            missing = [c for c in (POSITIVE,) if c not in names] + (
                [] if negative else ["sequence (or input)"]
            )
            raise schema_error(path, missing, names, self.expected_columns)
        rows = read_rows(
            path, required=[POSITIVE, negative], expected=self.expected_columns, limit=limit, seed=seed
        )
        for r in rows:
            r["_neg"] = r.pop(negative)
        return rows

    def score(self, examples: list[Example], ctx: EvalContext) -> Iterator[Record]:
        prefix = str(ctx.options.get("prefix") or "<dna>")
        chunk = max(64, 16 * ctx.batch_size)  # records reach the cache chunk by chunk
        for a in range(0, len(examples), chunk):
            part = examples[a : a + chunk]
            good = [e for e in part if _valid(e["pos"]) and _valid(e["neg"])]
            # all positives, then all negatives, in one pass (identical strings scored once)
            unique = list(dict.fromkeys([e["pos"] for e in good] + [e["neg"] for e in good]))
            values = (
                sequence_loglik(
                    ctx.carbon,
                    unique,
                    level=ctx.level,
                    batch_size=ctx.batch_size,
                    prefix=prefix,
                    on_error="nan",
                )
                if unique
                else np.zeros(0)
            )
            ll = dict(zip(unique, values.tolist(), strict=True))
            for e in part:
                yield self._record(e, ll)

    @staticmethod
    def _record(e: Example, ll: dict[str, float]) -> Record:
        rec: Record = {"id": e["id"], "subset": e["subset"], "row": e["row"]}
        pos, neg = e["pos"], e["neg"]
        if not _valid(pos) or not _valid(neg):
            rec.update(pos_hash=None, neg_hash=None, pos_score=None, neg_score=None, correct=None)
            rec["error"] = "original_sequence and sequence must be non-empty strings"
            return rec
        ps, ns = ll[pos], ll[neg]
        rec.update(pos_hash=seq_hash(pos), neg_hash=seq_hash(neg), pos_len=len(pos), neg_len=len(neg))
        if not (math.isfinite(ps) and math.isfinite(ns)):
            rec.update(pos_score=None, neg_score=None, correct=None)
            rec["error"] = "a sequence could not be scored (too long for the model's context or under 6 bp)"
            return rec
        rec.update(pos_score=ps, neg_score=ns, correct=int(ps > ns))  # strict: ties are wrong
        return rec

    def metrics(self, records: list[Record]) -> dict[str, float]:
        """``accuracy`` over the pairs that were scored (pairs with an error are counted in
        ``n_errors``, not in the accuracy); per-subset values when there is more than one subset."""
        scored = [r for r in records if r.get("correct") is not None]
        out: dict[str, float] = {
            "n": float(len(records)),
            "n_scored": float(len(scored)),
            "n_errors": float(len(records) - len(scored)),
            "accuracy": _mean([r["correct"] for r in scored]),
            "n_ties": float(sum(1 for r in scored if r["pos_score"] == r["neg_score"])),
            "mean_margin": _mean([r["pos_score"] - r["neg_score"] for r in scored]),
        }
        subsets = list(dict.fromkeys(r.get("subset") for r in records))
        if len(subsets) > 1:
            per = []
            for s in subsets:
                vals = [r["correct"] for r in scored if r.get("subset") == s]
                out[f"accuracy_{s}"] = _mean(vals)
                out[f"n_{s}"] = float(sum(1 for r in records if r.get("subset") == s))
                per.append(out[f"accuracy_{s}"])
            out["accuracy_mean_subsets"] = _mean(per)
        return out

    def plots(self, records: list[Record], out_dir: Path) -> list[Path]:
        """Histogram of the per-pair margin LL(original) - LL(perturbed) (right of 0 = correct)."""
        from hexamer.plots import plot_score_hist

        scored = [r for r in records if r.get("correct") is not None]
        if not scored:
            return []
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / f"{self.name}-margin.png"
        margins = [r["pos_score"] - r["neg_score"] for r in scored]
        groups = [r.get("subset") for r in scored]
        plot_score_hist(
            path,
            margins,
            groups if len(set(groups)) > 1 else None,
            title=f"{self.title}: LL(original) - LL(perturbed)",
            xlabel="mean log-likelihood margin (> 0: correct)",
        )
        return [path]


def _valid(seq: Any) -> bool:
    return isinstance(seq, str) and bool(seq.strip())


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else float("nan")


class TripletExpansion(PerturbationTask):
    """CAG x 10 written over a codon-aligned 30 bp block of a human CDS; headline pairwise accuracy."""

    name = "triplet"
    title = "Triplet (CAG) expansion"
    subsets = ("motif_human",)
    reference: ClassVar[dict[str, dict[str, float]]] = published_reference("triplet")


class SynonymousCodon(PerturbationTask):
    """Every codon replaced by the species' most frequent synonym (human + mouse); headline pooled
    pairwise accuracy over both subsets (see the module docstring)."""

    name = "codon"
    title = "Synonymous codon replacement"
    subsets = ("syn_human", "syn_mouse")
    reference: ClassVar[dict[str, dict[str, float]]] = published_reference("codon")
