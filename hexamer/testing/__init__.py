"""Test-only helpers: broken model folders (:mod:`~hexamer.testing.weights`), the CLI runner
(:mod:`~hexamer.testing.cli`), fine-tuned head folders, hang and interrupt drills.

What product code also needs (model folders with random weights, random VCFs) is in
:mod:`hexamer.synthetic`; product code never imports this package.
"""

from hexamer.testing.weights import OVERFLOW_TENSOR, build_overflowing_folder, poison_weights

__all__ = ["OVERFLOW_TENSOR", "build_overflowing_folder", "poison_weights"]
