"""Task name -> implementation, imported lazily so ``hexamer eval --task brca2`` loads only what it needs."""

from __future__ import annotations

import importlib

from hexamer.evals.task import Task

_TASKS: dict[str, str] = {
    "sr": "hexamer.evals.tasks.sequence_recovery:SequenceRecovery",
    "brca2": "hexamer.evals.tasks.vep_tasks:Brca2",
    "traitgym": "hexamer.evals.tasks.vep_tasks:TraitGymMendelian",
    "clinvar_coding": "hexamer.evals.tasks.clinvar:ClinVarCoding",
    "clinvar_noncoding": "hexamer.evals.tasks.clinvar:ClinVarNonCoding",
    "triplet": "hexamer.evals.tasks.perturbation:TripletExpansion",
    "codon": "hexamer.evals.tasks.perturbation:SynonymousCodon",
    "niah": "hexamer.evals.tasks.niah:GenomeNiah",
}
TASK_NAMES: tuple[str, ...] = tuple(_TASKS)


def get_task(name: str) -> Task:
    """A fresh task object by its CLI name."""
    try:
        target = _TASKS[name]
    except KeyError:
        raise ValueError(f"unknown task {name!r}; choose from {', '.join(TASK_NAMES)}") from None
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)()
