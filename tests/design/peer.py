"""DNA Chisel as the independent judge of designed sequences (its own pattern, GC and translation
code; enzyme sites from Biopython's REBASE tables, not from hexamer's)."""

from __future__ import annotations

import dnachisel as dc

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
    if spec.translate_to is not None and spec.cds_start is not None:
        end = spec.cds_start + 3 * len(spec.translate_to)
        specs.append(dc.EnforceTranslation(translation=spec.translate_to, location=(spec.cds_start, end)))
    failures = []
    if specs:
        problem = dc.DnaOptimizationProblem(sequence=seq, constraints=specs, logger=None)
        failures = [str(e.specification) for e in problem.constraints_evaluations() if not e.passes]
    if len(seq) != spec.length:
        failures.append("length")
    if not seq.startswith(spec.prefix) or not seq.endswith(spec.suffix):
        failures.append("prefix/suffix")
    return failures
