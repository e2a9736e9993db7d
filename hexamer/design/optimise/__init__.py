"""Oracle-guided sequence optimisation: maximise ``oracle + weight · log-likelihood per base`` by
greedy evolution (saturation mutagenesis), simulated annealing or minimal edits from a start
sequence, keeping hard constraints, frozen positions and an edit budget true at every step
(docs/design.md, "Oracle-guided optimisation")."""

from hexamer.design.optimise.anneal import anneal, temperatures
from hexamer.design.optimise.edits import Edit, EditConstraints, EditRules, NoConstraints
from hexamer.design.optimise.evolve import evolve, minimal_edit
from hexamer.design.optimise.likelihood import LikelihoodScorer
from hexamer.design.optimise.objective import Objective, Scores
from hexamer.design.optimise.oracles import CallableOracle, HeadOracle, MotifCountOracle, Oracle, PwmOracle
from hexamer.design.optimise.trajectory import OptimiseResult, Step, plot_trajectory

__all__ = [
    "CallableOracle",
    "Edit",
    "EditConstraints",
    "EditRules",
    "HeadOracle",
    "LikelihoodScorer",
    "MotifCountOracle",
    "NoConstraints",
    "Objective",
    "OptimiseResult",
    "Oracle",
    "PwmOracle",
    "Scores",
    "Step",
    "anneal",
    "evolve",
    "minimal_edit",
    "plot_trajectory",
    "temperatures",
]
