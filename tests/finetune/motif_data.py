"""A simulated motif task on real human DNA (the shipped chr20 slice), for the fine-tuning tests:
:mod:`hexamer.demo.motif_task` (the demo and the tutorial use the same rows)."""

from __future__ import annotations

from hexamer.demo.motif_task import MOTIF, motif_task

__all__ = ["MOTIF", "motif_task"]
