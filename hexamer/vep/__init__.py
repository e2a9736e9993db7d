"""Variant-effect prediction with Carbon models: VCF + FASTA in, scores out.

* VCF/BCF records (one :class:`Variant` per ALT) are read by :mod:`hexamer.io.vcf`, the reference
  FASTA by :class:`hexamer.io.reference.Reference`;
* :mod:`~hexamer.vep.recipes`: the window-likelihood and next-base recipes, defined exactly, and
  their plain reference implementation;
* :mod:`~hexamer.vep.settings`: :class:`VepSettings`, everything that decides the numbers;
* :mod:`~hexamer.vep.scoring`: :func:`score_variants`, the same numbers at throughput (shared
  prefixes, batching), and :func:`score_window_pairs` for windows you cut yourself; it plans
  work units (:mod:`~hexamer.vep.planner`: frozen data of :mod:`~hexamer.vep.units`) and runs
  them on the model's backend (:mod:`~hexamer.vep.runner`, a ``UnitRunner``);
* :mod:`~hexamer.vep.output`: annotated VCF/BCF (``HEXAMER_*`` INFO fields) or a table;
* :mod:`~hexamer.vep.job`: :func:`run_vep`, a checkpointed job that a killed run can resume
  (its chunk store: :mod:`~hexamer.vep.checkpoint`);
* :mod:`~hexamer.vep.summary`: rows per status and reason in one line of plain words.

    from hexamer import Carbon
    from hexamer.vep import VepSettings, score_variants, run_vep
    m = Carbon.from_pretrained("path/to/Carbon-3B")
    for row in score_variants(m, "calls.vcf.gz", "hg38.fa.gz", settings=VepSettings(recipe="window")):
        ...
    settings = VepSettings(recipe="next_base")
    run_vep(m, "calls.vcf.gz", "hg38.fa.gz", "scored.vcf.gz", settings=settings, resume=True)

Its benchmark lives in :mod:`hexamer.bench.vep`, the published-scripts baseline in
:mod:`hexamer.bench.baselines.published_vep`, random test VCFs in :mod:`hexamer.synthetic.vcf`.
"""

from hexamer.io.fasta import FastaError
from hexamer.io.reference import Reference
from hexamer.io.vcf.reader import VcfInputError, read_vcf
from hexamer.io.vcf.records import Variant, VcfRecord, classify
from hexamer.vep.job import ResumeError, VepRunResult, run_vep, sidecar_dir
from hexamer.vep.output import output_kind, write_vep_output
from hexamer.vep.recipes import DEFAULT_CONTEXT, DEFAULT_CONTEXT_GRID, DEFAULT_WINDOW, RECIPES
from hexamer.vep.scoring import score_variants, score_window_pairs
from hexamer.vep.settings import (
    ROW_COLUMNS,
    STATUSES,
    ContigRenameWarning,
    SettingsFittedWarning,
    VepSettings,
)
from hexamer.vep.summary import status_summary
from hexamer.vep.table_output import write_rows
from hexamer.vep.vcf_header import INFO_REASON, INFO_RECIPE, INFO_SCORE, INFO_STATUS
from hexamer.vep.vcf_output import VcfWriteResult, rejects_path, write_vcf

__all__ = [
    "DEFAULT_CONTEXT",
    "DEFAULT_CONTEXT_GRID",
    "DEFAULT_WINDOW",
    "INFO_REASON",
    "INFO_RECIPE",
    "INFO_SCORE",
    "INFO_STATUS",
    "RECIPES",
    "ROW_COLUMNS",
    "STATUSES",
    "ContigRenameWarning",
    "FastaError",
    "Reference",
    "ResumeError",
    "SettingsFittedWarning",
    "Variant",
    "VcfInputError",
    "VcfRecord",
    "VcfWriteResult",
    "VepRunResult",
    "VepSettings",
    "classify",
    "output_kind",
    "read_vcf",
    "rejects_path",
    "run_vep",
    "score_variants",
    "score_window_pairs",
    "sidecar_dir",
    "status_summary",
    "write_rows",
    "write_vcf",
    "write_vep_output",
]
