"""DNA Chisel as the independent judge of designed sequences (its own pattern and GC code;
enzyme sites from Biopython's REBASE tables, not from hexamer's), Biopython for translation."""

from __future__ import annotations

import dnachisel as dc
from Bio.Seq import Seq

from hexamer.design import DesignConstraints


def chisel_failures(spec: DesignConstraints, seq: str) -> list[str]:
    """The specifications DNA Chisel finds broken in ``seq`` (empty: every one holds)."""
    specs: list[object] = [dc.AvoidPattern(f"{e}_site") for e in spec.avoid_sites]
    specs += [dc.AvoidPattern(p) for p in spec.avoid]
    if spec.max_homopolymer is not None:
        specs += [dc.AvoidPattern(f"{spec.max_homopolymer + 1}x{b}") for b in "ACGT"]
    if spec.gc is not None:
        specs.append(dc.EnforceGCContent(mini=spec.gc[0], maxi=spec.gc[1]))
        if spec.gc_window is not None:
            specs.append(dc.EnforceGCContent(mini=spec.gc[0], maxi=spec.gc[1], window=spec.gc_window))
    failures = []
    if specs:  # (EnforceTranslation is left out: DNA Chisel rewrites the sequence to meet it)
        problem = dc.DnaOptimizationProblem(sequence=seq, constraints=specs, logger=None)
        assert problem.sequence == seq
        failures = [str(e.specification) for e in problem.constraints_evaluations() if not e.passes]
    if spec.translate_to is not None and spec.cds_start is not None:
        cds = seq[spec.cds_start : spec.cds_start + 3 * len(spec.translate_to)]
        if str(Seq(cds).translate()) != spec.translate_to:  # Biopython's standard table
            failures.append("translate_to")
    if len(seq) != spec.length:
        failures.append("length")
    if not seq.startswith(spec.prefix) or not seq.endswith(spec.suffix):
        failures.append("prefix/suffix")
    return failures
