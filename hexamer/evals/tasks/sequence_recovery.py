"""Sequence recovery (``evals.md`` §1): greedy continuation of real genomic context.

Prompt = ``<dna>`` + the rightmost ``min(len(sequence), max_seq_len)`` bases (default 6,144), rounded
down to whole 6-mers from the left (the end, next to the prediction point, is kept). ``gen_len``
(default 5) tokens = 30 bp are generated greedily with :meth:`Carbon.generate`: token level picks the
most likely 6-mer, bp level the most likely base at each of the six positions (FNS marginals).

Per row: matches between ``label`` and the prediction over the first ``min(len(label), len(pred),
30)`` positions, **divided by 30** (a short or empty prediction is penalised). The headline is the
mean over rows; ``type_accuracy.<type>`` the mean within each group.

Difference from the published script: hexamer's greedy choice is over the 4,096 6-mers, whereas the
script takes the argmax over the whole vocabulary with only the special ids banned, so a BPE text
token could in principle win. After kilobases of ``<dna>`` context a trained Carbon puts
negligible mass there; a prediction that leaves the 6-mer block would be scored as text.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

from hexamer.evals.data import ROW_INDEX, find_file, read_rows, row_hash
from hexamer.evals.published import published_reference
from hexamer.evals.task import EvalContext, Example, Record, Task

__all__ = ["SequenceRecovery", "recovery_accuracy", "sr_context"]

SCORED_BP = 30


def sr_context(sequence: str, max_seq_len: int, k: int = 6) -> str:
    """The rightmost ``min(len, max_seq_len)`` bases, cut from the left to whole k-mers."""
    ctx = sequence[len(sequence) - min(len(sequence), max_seq_len) :]
    return ctx[len(ctx) % k :]


def recovery_accuracy(label: str, pred: str, n: int = SCORED_BP) -> float:
    """Matching positions among the first ``min(len(label), len(pred), n)``, divided by ``n``."""
    m = min(len(label), len(pred), n)
    return sum(1 for i in range(m) if label[i] == pred[i]) / n


class SequenceRecovery(Task):
    """GenerTeam sequence recovery, eukaryote split (30,000 rows, 6 groups); headline per-base accuracy."""

    name = "sr"
    title = "Sequence recovery"
    headline = "accuracy"
    expected_columns: ClassVar[dict[str, str]] = {
        "sequence": "DNA context (str)",
        "label": "held-out continuation (str, >= 30 bp; 128 bp in the eukaryote split)",
        "type": "optional: group (fungi, invertebrate, plant, protozoa, vertebrate_mammalian, vertebrate_other)",
    }
    default_options: ClassVar[dict[str, Any]] = {"data_type": "eukaryote", "max_seq_len": 6144, "gen_len": 5}
    data_candidates = ("sequence-recovery/eukaryote/test.parquet", "sequence-recovery")
    summary_keys: ClassVar[dict[str, str]] = {
        "accuracy": "overall_accuracy",
        "type_accuracy": "type_accuracy",
        "n": "num_sequences",
    }
    reference: ClassVar[dict[str, dict[str, float]]] = published_reference("sr")

    def __init__(self) -> None:
        self.data_type = "eukaryote"

    def configure(self, options: Mapping[str, Any]) -> None:
        self.data_type = str(options.get("data_type", "eukaryote"))

    def load(self, data: Path, *, limit: int | None = None, seed: int = 0) -> list[Example]:
        dt = self.data_type
        path = find_file(
            Path(data),
            (f"{dt}/test.parquet", "test.parquet", f"sequence-recovery/{dt}/test.parquet"),
            self.title,
        )
        rows = read_rows(
            path,
            required=["sequence", "label"],
            optional=["type"],
            expected=self.expected_columns,
            limit=limit,
            seed=seed,
        )
        return [
            {
                "id": row_hash(r["sequence"], r[ROW_INDEX]),
                "row": r[ROW_INDEX],
                "type": r.get("type"),
                "sequence": r["sequence"],
                "label": r["label"],
            }
            for r in rows
        ]

    def score(self, examples: list[Example], ctx: EvalContext) -> Iterator[Record]:
        carbon = ctx.carbon
        k = carbon.layout.k
        gen_len = int(ctx.options.get("gen_len", 5))
        max_seq_len = int(ctx.options.get("max_seq_len", 6144))
        fits = ctx.dna_fits(new_tokens=gen_len)
        if max_seq_len > fits:
            longest = max((len(e["sequence"]) for e in examples if isinstance(e["sequence"], str)), default=0)
            if longest > fits:
                ctx.notes.append(
                    f"context clipped to {fits} bp to fit the model's {carbon.context_length} tokens "
                    f"(published: {max_seq_len})"
                )
            max_seq_len = fits
        chunk = max(16, 4 * ctx.batch_size)
        for a in range(0, len(examples), chunk):
            part = examples[a : a + chunk]
            prompts: list[str] = []
            good: list[Example] = []
            for e in part:
                seq, label = e["sequence"], e["label"]
                if not isinstance(seq, str) or not isinstance(label, str):
                    yield self._record(e, "", error="sequence and label must be strings")
                    continue
                context = sr_context(seq.strip(), max_seq_len, k)
                prompt = "<dna>" + context
                try:
                    carbon.check_prompt(prompt, max_new_tokens=gen_len, mode=ctx.level, temperature=0)
                except ValueError as exc:
                    yield self._record(e, "", error=str(exc))
                    continue
                prompts.append(prompt)
                good.append(e)
            if not prompts:
                continue
            gens = carbon.generate(prompts, max_new_tokens=gen_len, mode=ctx.level, temperature=0)
            for e, g in zip(good, gens, strict=True):
                yield self._record(e, g.sequence)

    @staticmethod
    def _record(e: Example, pred: str, error: str | None = None) -> Record:
        label = e["label"] if isinstance(e["label"], str) else ""
        rec: Record = {
            "id": e["id"],
            "row": e["row"],
            "type": e["type"],
            "label": label[:SCORED_BP],
            "pred": pred,
            "accuracy": recovery_accuracy(label, pred),
        }
        if error:
            rec["error"] = error
        return rec

    def metrics(self, records: list[Record]) -> dict[str, float]:
        out: dict[str, float] = {
            "n": float(len(records)),
            "n_errors": float(sum(1 for r in records if r.get("error"))),
        }
        out["accuracy"] = sum(r["accuracy"] for r in records) / len(records) if records else float("nan")
        by_type: dict[str, list[float]] = defaultdict(list)
        for r in records:
            if r.get("type") is not None:
                by_type[str(r["type"])].append(r["accuracy"])
        for t in sorted(by_type):
            out[f"type_accuracy.{t}"] = sum(by_type[t]) / len(by_type[t])
        return out

    def plots(self, records: list[Record], out_dir: Path) -> list[Path]:
        from matplotlib.figure import Figure

        m = self.metrics(records)
        types = [k.split(".", 1)[1] for k in m if k.startswith("type_accuracy.")]
        if not types:
            return []
        out_dir.mkdir(parents=True, exist_ok=True)
        fig = Figure(figsize=(6.5, 3.8), layout="constrained")
        ax = fig.add_subplot()
        values = [m[f"type_accuracy.{t}"] for t in types]
        ax.bar(range(len(types)), values, color="#4C72B0")
        ax.axhline(
            m["accuracy"], color="black", linestyle="--", linewidth=0.8, label=f"overall {m['accuracy']:.3f}"
        )
        ax.axhline(0.25, color="grey", linestyle=":", linewidth=0.8, label="chance 0.25")
        ax.set_xticks(range(len(types)), [t.replace("_", "\n") for t in types], fontsize="small")
        ax.set_ylim(0, 1)
        ax.set_ylabel("per-base accuracy (first 30 bp)")
        ax.set_title(f"{self.title} by group")
        ax.legend(fontsize="small")
        path = out_dir / "sr-by-type.png"
        fig.savefig(path, dpi=120)
        return [path]
