"""ClinVar coding and non-coding: next-base variant-effect prediction (``evals.md`` §3).

For each SNV the context is ``hg38[chrom][max(0, pos-1-ctx) : pos-1]`` (the ``ctx`` bases left of the
variant, default 24,000; 48,000 was also published), leading ``N`` stripped, then cut **from the
left** to whole 6-mers so a token boundary falls right before the variant. ``<dna>`` + context is
run once and the distribution of the next token is marginalised to its first base:

* token level (the published recipe): softmax over the **whole vocabulary**, and P(b) = the sum over
  every vocabulary entry whose string is made only of A/C/G/T and starts with b (the 6-mers and
  all-ACGT BPE pieces such as ``A`` or ``GT``; as in the script, entries come from ``get_vocab()``,
  where the BPE ``CCCCCC`` shadows the 6-mer ``CCCCCC``). score = ln(P(ref) / (P(alt) + 1e-10)).
* bp level: the FNS marginal of the first base (6-mer block only, renormalised), score =
  log P(ref) - log P(alt) (what :mod:`hexamer.vep`'s next-base recipe computes).

A higher score means the alt base is more surprising, i.e. more likely pathogenic (label 1).
Metrics: AUROC and trapezoidal AUPRC; breakdowns by ``region`` and ``variant_type`` (published) and
``region_subtype`` (extra) for groups with both classes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from hexamer.evals.data import variant_example
from hexamer.evals.genome import REFERENCE_NAMES, ReferenceGenome, find_reference
from hexamer.evals.metrics import auprc_trapezoid, auroc
from hexamer.evals.published import published_reference
from hexamer.evals.task import EvalContext, Example, Record, roc_pr_plots
from hexamer.evals.tasks.variant_table import VariantTableTask
from hexamer.fns import log_base_marginals
from hexamer.fns.tables import BASE_INDEX
from hexamer.model import pad_rows
from hexamer.tokenizer.dna import encode_dna

__all__ = ["ClinVarCoding", "ClinVarNonCoding", "ClinVarTask", "acgt_first_base_ids", "clinvar_context"]

BREAKDOWN_COLUMNS = ("region", "variant_type", "region_subtype")
#: the ClinVar dataset's folder names under ``--data-root``, the public one first
DATASET_FOLDERS = ("clinvar-vep-final", "clinvar-vep", "clinvar")
_ACGT = frozenset("ACGT")


def clinvar_context(chrom_seq_left: str, k: int = 6) -> str:
    """The published context from the bases left of the variant: leading N stripped, cut from the left to whole k-mers."""
    seq = chrom_seq_left.lstrip("N")
    return seq[len(seq) % k :]


def acgt_first_base_ids(vocab: Mapping[str, int]) -> dict[str, list[int]]:
    """Vocabulary ids whose token string is all A/C/G/T, grouped by its first character."""
    out: dict[str, list[int]] = {b: [] for b in "ACGT"}
    for token, tid in vocab.items():
        if token and set(token) <= _ACGT:
            out[token[0]].append(int(tid))
    return out


def _public_files(subset: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``file_names`` and ``data_candidates`` of one ClinVar subset (``coding``, ``non_coding``): the
    public file is ``SUBSET/clinvar_SUBSET.parquet`` in the dataset folder, which ``--data-root`` may
    hold under any of :data:`DATASET_FOLDERS`."""
    file = f"{subset}/clinvar_{subset}.parquet"
    return (file, f"clinvar_{subset}.parquet"), tuple(f"{folder}/{file}" for folder in DATASET_FOLDERS)


def _label(value: Any) -> int | None:
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return int(f) if f in (0.0, 1.0) else None


class ClinVarTask(VariantTableTask):
    """Shared loading, scoring and metrics of the two ClinVar files."""

    headline = "auroc"
    expected_columns: ClassVar[dict[str, str]] = {
        "chrom": "chromosome without 'chr' ('1'..'22', 'X')",
        "pos": "1-based hg38 position",
        "ref": "reference base",
        "alt": "alternate base",
        "label": "1 = pathogenic (positive), 0 = benign",
        "region / variant_type / region_subtype": "optional: breakdown groups",
    }
    default_options: ClassVar[dict[str, Any]] = {"context_length": 24000, "hg38": None}
    summary_keys: ClassVar[dict[str, str]] = {
        "n": "num_variants",
        "auroc": "AUROC",
        "auprc": "AUPRC",
        "breakdowns": "breakdowns",
    }

    def __init__(self) -> None:
        self.hg38: Path | None = None

    def configure(self, options: Mapping[str, Any]) -> None:
        value = options.get("hg38")
        self.hg38 = Path(value) if value else None

    def load(self, data: Path, *, limit: int | None = None, seed: int = 0) -> list[Example]:
        path = self.table_path(data)
        if self.hg38 is None:
            found = find_reference(path)
            if found is None:
                raise FileNotFoundError(
                    f"{self.title} needs the hg38 reference: pass --hg38 (hg38.parquet with ID/Sequence, or a FASTA), "
                    f"or put one of {', '.join(REFERENCE_NAMES[:3])} next to the data or up to 3 folders above"
                )
            self.hg38 = found
        elif not self.hg38.is_file():
            raise FileNotFoundError(f"hg38 reference {self.hg38} does not exist")
        rows = self.read_variants(
            path, required=["label"], optional=BREAKDOWN_COLUMNS, limit=limit, seed=seed
        )
        return [
            {
                **variant_example(r, chrom=str(r["chrom"]).removeprefix("chr")),
                "y": _label(r["label"]),
                **{c: r[c] for c in BREAKDOWN_COLUMNS if c in r},
            }
            for r in rows
        ]

    # ------------------------------------------------------------------ scoring
    def _context_bp(self, ctx: EvalContext) -> int:
        asked = int(ctx.options.get("context_length", 24000))
        fits = ctx.dna_fits()
        if asked > fits:
            ctx.notes.append(
                f"context clipped to {fits} bp to fit the model's {ctx.carbon.context_length} tokens (asked: {asked})"
            )
            return fits
        return asked

    def _invalid(self, e: Example) -> str | None:
        if not isinstance(e["ref"], str) or e["ref"].upper() not in _ACGT:
            return f"ref {e['ref']!r} is not a single A/C/G/T base"
        if not isinstance(e["alt"], str) or e["alt"].upper() not in _ACGT:
            return f"alt {e['alt']!r} is not a single A/C/G/T base"
        if not isinstance(e["pos"], int) or e["pos"] < 1:
            return f"pos {e['pos']!r} is not a 1-based position"
        if e["y"] is None:
            return "label is not 0/1"
        return None

    def score(self, examples: list[Example], ctx: EvalContext) -> Iterator[Record]:
        if self.hg38 is None:
            raise FileNotFoundError(f"{self.title}: no hg38 reference (load() finds or is given one)")
        carbon = ctx.carbon
        context_bp = self._context_bp(ctx)
        genome = ReferenceGenome(self.hg38)
        first_ids = None
        if ctx.level == "token":
            vocab = carbon.tokenizer.get_vocab()
            first_ids = {
                b: torch.tensor(ids, dtype=torch.int64, device=carbon.model.device)
                for b, ids in acgt_first_base_ids(vocab).items()
            }
        ordered = sorted(
            examples, key=lambda e: (str(e["chrom"]), e["pos"] if isinstance(e["pos"], int) else 0)
        )
        pending: list[tuple[Example, list[int], dict[str, Any]]] = []
        try:
            for e in ordered:
                problem = self._invalid(e)
                info: dict[str, Any] = {}
                if problem is None:
                    try:
                        p0 = e["pos"] - 1
                        left = genome.fetch(e["chrom"], p0 - context_bp, p0 + 1)
                    except (KeyError, ValueError) as exc:
                        problem = str(exc).strip("'\"")
                if problem is not None:
                    yield self._record(e, {"error": problem})
                    continue
                ref_base, left = left[-1:].upper(), left[:-1]
                context = clinvar_context(left, carbon.layout.k)
                info = {"ref_match": ref_base == e["ref"].upper(), "n_context_bp": len(context)}
                ids = [carbon.layout.begin_id, *encode_dna(context, carbon.layout).ids.tolist()]
                pending.append((e, ids, info))
                if len(pending) >= ctx.batch_size:
                    yield from self._run(ctx, pending, first_ids)
                    pending = []
            if pending:
                yield from self._run(ctx, pending, first_ids)
        finally:
            genome.close()

    @torch.inference_mode()
    def _run(
        self,
        ctx: EvalContext,
        batch: list[tuple[Example, list[int], dict[str, Any]]],
        first_ids: dict[str, torch.Tensor] | None,
    ) -> Iterator[Record]:
        carbon = ctx.carbon
        layout = carbon.layout
        device = carbon.model.device
        padded = pad_rows([ids for _, ids, _ in batch], carbon.tokenizer.pad_token_id or 0)
        last = torch.tensor([len(ids) - 1 for _, ids, _ in batch], device=device)
        rows = None if first_ids is not None else (layout.kmer_start, layout.kmer_stop)
        logits = carbon.model(
            padded.ids_on(device),
            attention_mask=padded.mask_on(device),
            logits_at=last,
            vocab_rows=rows,
        ).logits
        assert logits is not None
        if first_ids is not None:
            probs = torch.softmax(logits.double(), dim=-1)
            mass = torch.stack([probs[:, first_ids[b]].sum(-1) for b in "ACGT"], dim=-1).cpu().numpy()
            for r, (e, _, info) in enumerate(batch):
                p_ref, p_alt = (float(mass[r, "ACGT".index(b.upper())]) for b in (e["ref"], e["alt"]))
                score = float(np.log(p_ref / (p_alt + 1e-10)))
                yield self._record(e, {**info, "p_ref": p_ref, "p_alt": p_alt, "score": score})
        else:
            first = log_base_marginals(logits.double())[:, 0].cpu()  # (B, 4) ATCG order
            for r, (e, _, info) in enumerate(batch):
                lr, la = (float(first[r, BASE_INDEX[b.upper()]]) for b in (e["ref"], e["alt"]))
                yield self._record(
                    e, {**info, "p_ref": float(np.exp(lr)), "p_alt": float(np.exp(la)), "score": lr - la}
                )

    @staticmethod
    def _record(e: Example, values: dict[str, Any]) -> Record:
        rec = ClinVarTask.variant_record(e, "y")
        rec.update({c: e[c] for c in BREAKDOWN_COLUMNS if c in e})
        rec.setdefault("score", None)
        rec.update(values)
        if rec.get("score") is not None and not np.isfinite(rec["score"]):
            rec["error"], rec["score"] = "non-finite score", None
        return rec

    # ------------------------------------------------------------------ metrics
    def metrics(self, records: list[Record]) -> dict[str, float]:
        ok = [r for r in records if r.get("y") is not None and r.get("score") is not None]
        y = [r["y"] for r in ok]
        s = [r["score"] for r in ok]
        out: dict[str, float] = {
            "n": float(len(records)),
            "n_errors": float(sum(1 for r in records if r.get("error"))),
            "n_ref_mismatch": float(sum(1 for r in records if r.get("ref_match") is False)),
            "auroc": auroc(y, s),
            "auprc": auprc_trapezoid(y, s),
        }
        for col in BREAKDOWN_COLUMNS:
            values = sorted({str(r[col]) for r in ok if r.get(col) is not None})
            for v in values:
                sel = [(r["y"], r["score"]) for r in ok if r.get(col) is not None and str(r[col]) == v]
                ys = [a for a, _ in sel]
                if 0 < sum(ys) < len(ys):
                    key = f"breakdowns.{col}={v}"
                    out[f"{key}.n"] = float(len(sel))
                    out[f"{key}.AUROC"] = auroc(ys, [b for _, b in sel])
                    out[f"{key}.AUPRC"] = auprc_trapezoid(ys, [b for _, b in sel])
        return out

    def plots(self, records: list[Record], out_dir: Path) -> list[Path]:
        ok = [(r["y"], r["score"]) for r in records if r.get("y") is not None and r.get("score") is not None]
        return roc_pr_plots(self, out_dir, ok, score="score", classes="pathogenic vs benign")


class ClinVarCoding(ClinVarTask):
    """ClinVar coding SNVs (GPN-MSA set, 39,473), hg38; headline AUROC at 24 kb context."""

    name = "clinvar_coding"
    title = "ClinVar coding"
    file_names, data_candidates = _public_files("coding")
    reference: ClassVar[dict[str, dict[str, float]]] = published_reference("clinvar_coding")


class ClinVarNonCoding(ClinVarTask):
    """ClinVar non-coding SNVs (Carbon curation, 15,258 balanced; intronic and UTR), hg38; headline AUROC."""

    name = "clinvar_noncoding"
    title = "ClinVar non-coding"
    file_names, data_candidates = _public_files("non_coding")
    reference: ClassVar[dict[str, dict[str, float]]] = published_reference("clinvar_noncoding")
