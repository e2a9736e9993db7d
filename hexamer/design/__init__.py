"""Sequence design: hard constraints enforced base by base while the model decodes.

``DesignConstraints`` states the rules (checked on construction), ``compile_constraints`` proves them
satisfiable and gives the ``ConstraintSet`` decoding consults, ``design`` samples or beam-searches
candidates ranked by base-level log-likelihood, ``check`` measures any sequence against the rules
and ``allows_edit`` tells whether one base change keeps them (for edit-based search). See
docs/design.md.
"""

from hexamer.design.api import Candidate, DesignOptions, DesignResult, design, hamming
from hexamer.design.check import ConstraintResult, SpecEditConstraints, allows_edit, check, gc_fraction
from hexamer.design.constraints import ConstraintSet, Partial, compile_constraints
from hexamer.design.decode import random_sequence
from hexamer.design.sites import known_enzymes, site_of
from hexamer.design.spec import DesignConstraints, DesignError, UnsatisfiableError

__all__ = [
    "Candidate",
    "ConstraintResult",
    "ConstraintSet",
    "DesignConstraints",
    "DesignError",
    "DesignOptions",
    "DesignResult",
    "Partial",
    "SpecEditConstraints",
    "UnsatisfiableError",
    "allows_edit",
    "check",
    "compile_constraints",
    "design",
    "gc_fraction",
    "hamming",
    "known_enzymes",
    "random_sequence",
    "site_of",
]
