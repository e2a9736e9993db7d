"""Variant effects of a fine-tuned head: ``prediction(alt window) - prediction(ref window)`` for
each output, over ``hexamer vep``'s own job.

Everything but the model work is ``hexamer vep``'s (:func:`hexamer.vep.run_vep`): the VCF reader
and ``classify`` (so the same records are ``skipped``, ``ref_mismatch`` or ``failed`` for the same
reasons), the reference and contig aliasing, the window recipe's equal-length ref/alt windows and
its ``N``-next-to-the-variant rule, the work units, the resumable chunk store, the provenance and
the writers (annotated VCF or table). This module brings the two things that differ:

* :class:`EffectRunner`, a :class:`~hexamer.vep.runner.Runner` whose window scores are the head's
  raw-scale predictions of each alt window minus those of its ref window (both strands averaged
  when the predictor does), and whose ``ok`` rows carry one effect per output;
* :class:`HeadVariantModel`, the few facts about the model the job reads (k, the longest prompt,
  the device, a fingerprint for resume).

Windows are the length the head was trained on (its folder's ``max_length``), centred on the
variant, clipped at contig ends. Each row's ``score`` is the effect on the one output of a
single-target regression, or on the probability of the second class of a binary head (the
positive class); for other heads it is empty and the per-output columns hold the effects.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from hexamer.finetune.apply import Predictor, output_columns
from hexamer.finetune.data import normalize_dna
from hexamer.finetune.head import HeadSettings
from hexamer.finetune.task import TaskSpec
from hexamer.io.reference import Reference
from hexamer.io.vcf.index import indexed_records
from hexamer.io.vcf.records import Variant
from hexamer.vep.job import VepRunResult, run_vep
from hexamer.vep.recipes import WindowPair
from hexamer.vep.rows import Row, result_row, row_schema
from hexamer.vep.runner import Runner
from hexamer.vep.settings import VepSettings
from hexamer.vep.vcf_header import extra_info

__all__ = [
    "EffectRunner",
    "HeadVariantModel",
    "count_variant_rows",
    "effect_columns",
    "effect_settings",
    "plot_effects",
    "run_effects",
    "score_output",
]

PathLike = str | os.PathLike[str]


def effect_columns(task: TaskSpec) -> dict[str, str]:
    """``column -> description`` of the effect columns (named as the prediction columns)."""
    what = "value" if task.kind == "regression" else "probability"
    return {
        c: f"hexamer fine-tuned head: {what} {c} of the alt window minus that of the ref window"
        for c in output_columns(task)
    }


def score_output(task: TaskSpec) -> int | None:
    """The output whose effect fills the ``score`` column: the one regression target, or the
    second class of a binary head; None when no single output speaks for the head."""
    if task.kind == "regression" and len(task.label_columns) == 1:
        return 0
    if task.kind == "binary":
        return 1
    return None


class _HeadFacts:
    """The backend facts the VEP planner and settings read, for a head (no LM operations)."""

    kind = "local"
    supports_kv_sharing = False
    supports_embeddings = False
    supports_served_embeddings = False

    def __init__(self, predictor: Predictor) -> None:
        model = predictor.model
        self.layout = model.tokenizer.layout
        self.tokenizer = model.tokenizer
        self.device = model.device
        #: ``<dna>`` + 6-mers must leave room for ``</dna>``, the token the head reads
        self.max_prompt_tokens = model.context_length - 1
        self.context_length = model.context_length
        self._predictor = predictor

    def fingerprint(self) -> str:
        """A short hash of the head's configuration, settings and a few weights (score included):
        what a resumed job compares (how it is run, e.g. the strands, is in the job's settings)."""
        p = self._predictor
        h = hashlib.sha256(repr(p.model.backbone.config).encode())
        h.update(json.dumps(p.model.settings.to_json(), sort_keys=True).encode())
        params = list(p.model.named_parameters())
        for name, param in [*params[:: max(1, len(params) // 8)], params[-1]]:
            h.update(name.encode())
            h.update(param.detach().reshape(-1)[:64].float().cpu().numpy().tobytes())
        return h.hexdigest()[:16]


class HeadVariantModel:
    """A :class:`Predictor` seen as the VEP job sees a model (``backend`` facts and ``layout``)."""

    def __init__(self, predictor: Predictor) -> None:
        self.predictor = predictor
        self.backend = _HeadFacts(predictor)
        self.layout = self.backend.layout
        self.model = predictor.model


class EffectRunner(Runner):
    """The window units of ``hexamer vep`` with a head's predictions instead of log-likelihoods."""

    def __init__(self, predictor: Predictor, reference: Reference, settings: VepSettings) -> None:
        super().__init__(_HeadFacts(predictor), reference, settings, naive=True)
        # the strands and batches the job's settings say, wherever the head was loaded (an actor)
        self.predictor = dataclasses.replace(
            predictor, rc_average=settings.rc_average, batch_size=settings.batch_size
        )
        self.columns = output_columns(predictor.task)
        self.score_index = score_output(predictor.task)

    def window_scores(self, sites: list[list[WindowPair]]) -> list[list[Any]]:
        """Per pair, the raw-scale effect on every output, ``(outputs,)`` float64; every distinct
        window of the unit is predicted once."""
        windows = list(
            dict.fromkeys(normalize_dna(x) for site in sites for p in site for x in (p.ref, p.alt))
        )
        values = dict(zip(windows, self.predictor.predict(windows), strict=True))
        return [[values[normalize_dna(p.alt)] - values[normalize_dna(p.ref)] for p in site] for site in sites]

    def ok_row(self, v: Variant, value: Any, *, n_scored_bp: int, n_oov_bp: int) -> Row:
        effects = np.asarray(value, dtype=np.float64)
        score = None if self.score_index is None else float(effects[self.score_index])
        row = result_row(v, self.s.recipe, "ok", score, n_scored_bp=n_scored_bp, n_oov_bp=n_oov_bp)
        row.update({c: float(x) for c, x in zip(self.columns, effects, strict=True)})
        return row


def effect_settings(
    head: HeadSettings,
    *,
    window: int | None = None,
    rc_average: bool | None = None,
    batch_size: int = 32,
    block_records: int = 50_000,
) -> VepSettings:
    """The VEP settings of a head's job, range-checked: the window recipe, ``window`` bp (default:
    the training length the folder records), both strands averaged when ``rc_average`` (default:
    the folder's setting), ``batch_size`` windows per forward, ``block_records`` records planned
    at a time (a Ray shard holds whole blocks)."""
    size = window if window is not None else head.max_length
    if size is None:
        raise ValueError(
            "the head folder records no training sequence length (hexamer_finetune max_length): "
            "give the window length"
        )
    settings = VepSettings(
        recipe="window",
        window=size,
        rc_average=head.rc_average if rc_average is None else rc_average,
        batch_size=batch_size,
        block_records=block_records,
    )
    return settings.check()


def run_effects(
    predictor: Predictor,
    vcf: PathLike,
    fasta: PathLike,
    output: PathLike,
    *,
    window: int | None = None,
    resume: bool = False,
    checkpoint_rows: int = 5000,
    checkpoint_seconds: float = 60.0,
    on_progress: Callable[[int], None] | None = None,
    on_note: Callable[[str], None] | None = None,
    renames: PathLike | Mapping[str, str] | None = None,
    info_fields: str | Sequence[str] | None = None,
    settings: VepSettings | None = None,
) -> VepRunResult:
    """Variant effects of every ALT of ``vcf`` into ``output`` (annotated VCF/BCF or a table, by
    extension), with :func:`hexamer.vep.run_vep`'s statuses, reasons, checkpoints and ``resume``.
    Rows carry one effect column per output (:func:`effect_columns`; VCF: ``HEXAMER_<column>``).
    ``settings`` (default: :func:`effect_settings` of the folder, with ``window`` and the
    predictor's strands and batch size) decide the windows, strands and batches."""
    if settings is None:
        settings = effect_settings(
            predictor.model.settings,
            window=window,
            rc_average=predictor.rc_average,
            batch_size=predictor.batch_size,
        )
    columns = effect_columns(predictor.task)
    row_schema(columns)  # a label column named like a standard one fails now, not at the first chunk
    extra_info(columns)
    with torch.inference_mode():
        return run_vep(
            HeadVariantModel(predictor),  # type: ignore[arg-type]  # the facts run_vep reads
            vcf,
            fasta,
            output,
            resume=resume,
            checkpoint_rows=checkpoint_rows,
            checkpoint_seconds=checkpoint_seconds,
            on_progress=on_progress,
            on_note=on_note,
            renames=renames,
            info_fields=info_fields,
            settings=settings,
            make_runner=lambda reference, checked: EffectRunner(predictor, reference, checked),
            extra_columns=columns,
        )


def count_variant_rows(vcf: PathLike) -> int | None:
    """The progress total of :func:`run_effects` for ``vcf``, found as ``hexamer vep`` finds its
    own: the record count of the VCF's tabix/CSI index (no pass over the records); None without an
    index, or when the file cannot be read (the job reports why)."""
    try:
        return indexed_records(vcf)
    except (OSError, ValueError):
        return None


def plot_effects(path: PathLike, result: VepRunResult, task: TaskSpec) -> dict[str, int]:
    """The distribution of the ``score`` effects of a finished job per variant kind, as
    ``hexamer vep --plot`` draws its scores; returns the plotted rows per kind. Only heads whose
    effect has one ``score`` (:func:`score_output`) have one to draw: for the others, plot a
    column of the table (``hexamer plot hist TABLE --score-col COLUMN --by kind``)."""
    index = score_output(task)
    if index is None:
        raise ValueError(
            f"this head has {task.num_labels} outputs and no single score to plot; plot one column "
            "of the table with: hexamer plot hist TABLE --score-col COLUMN --by kind"
        )
    from hexamer import plots

    column = output_columns(task)[index]
    what = "value" if task.kind == "regression" else "probability"
    return plots.plot_score_hist(
        path,
        result.scores,
        result.kinds,
        title=f"fine-tuned head: effect on {column} per variant kind",
        xlabel=f"{what} {column}: alt window minus ref window",
    )
