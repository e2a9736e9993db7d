"""Speculative decoding: a small draft model proposes 6-mers, the target checks them in one forward.

It runs inside the engine: :meth:`Engine.attach_draft <hexamer.engine.Engine.attach_draft>` gives
the engine a draft model, and every :class:`~hexamer.engine.Request` whose ``speculative`` is a
:class:`SpecConfig` is decoded in draft-and-verify rounds (:func:`hexamer.engine.verify.speculative_round`)
by the same scheduler steps that advance plain requests, so both batch together (Python API and
server alike). Each round emits between 1 and k + 1 tokens per target forward and the output is
distributed exactly as target-only decoding (greedy: identical token for token); the maths is in
:mod:`hexamer.fns.speculative`, the proposals in :mod:`hexamer.engine.draft`, the draft length in
:mod:`hexamer.engine.spec_config`. docs/speculative.md has the algorithm and the proof.

    engine = Engine(target_model, layout)
    engine.attach_draft(draft_model)
    engine.run([Request(ids, SamplingParams(max_bp=300, seed=0), speculative=SpecConfig()), ...])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from hexamer.engine.config import EngineConfig
from hexamer.engine.engine import Engine
from hexamer.engine.request import Request
from hexamer.engine.spec_config import SpecConfig, SpecStats
from hexamer.model import LlamaModel
from hexamer.tokenizer.layout import DnaLayout

__all__ = ["SpeculativeDecoder", "check_compatible"]


class _ModelWithTokenizer(Protocol):
    """What :func:`check_compatible` reads of each side (a loaded model folder)."""

    layout: DnaLayout
    model: LlamaModel

    @property
    def tokenizer(self) -> object: ...


PROBE = "<mammalian_species> The quick brown fox, 0123. <dna>ACGTACGGT"


def check_compatible(target: _ModelWithTokenizer, draft: _ModelWithTokenizer) -> None:
    """Raise ``ValueError`` unless the draft reads and writes the same token ids as the target
    (same DNA layout, vocabulary size and text encoding)."""
    if draft.layout != target.layout:
        raise ValueError(
            f"draft and target DNA layouts differ (draft: DNA block at {draft.layout.dna_start_id}, k={draft.layout.k}; "
            f"target: DNA block at {target.layout.dna_start_id}, k={target.layout.k}); "
            "speculative decoding needs two models with the same tokenizer"
        )
    d_tok, t_tok = draft.tokenizer, target.tokenizer
    if draft.model.config.vocab_size != target.model.config.vocab_size or len(d_tok) != len(t_tok):  # type: ignore[arg-type]
        raise ValueError(
            f"draft vocabulary ({len(d_tok)} tokens, model {draft.model.config.vocab_size}) differs from the "  # type: ignore[arg-type]
            f"target's ({len(t_tok)}, model {target.model.config.vocab_size}); "  # type: ignore[arg-type]
            "speculative decoding needs two models with the same tokenizer"
        )
    if d_tok.encode(PROBE) != t_tok.encode(PROBE):  # type: ignore[attr-defined]
        raise ValueError("draft and target tokenizers encode text differently; they must share one tokenizer")


class SpeculativeDecoder:
    """An engine of its own with ``draft`` attached: decodes engine requests speculatively.

    Requests are engine :class:`~hexamer.engine.Request` objects (prompt ids ending on a 6-mer
    boundary, forced tail, :class:`~hexamer.engine.SamplingParams`); they are filled in place.
    ``config.max_batch_size`` rows decode together.
    """

    def __init__(
        self, target: LlamaModel, draft: LlamaModel, layout: DnaLayout, config: SpecConfig | None = None
    ) -> None:
        self.config = config or SpecConfig()
        self.engine = Engine(target, layout, EngineConfig(max_batch_size=self.config.max_batch_size))
        self.engine.attach_draft(draft)
        self.stats = SpecStats()

    def run(
        self, requests: Sequence[Request], on_step: Callable[[list[Request]], None] | None = None
    ) -> SpecStats:
        """Decode every request to the end; returns (and accumulates into ``self.stats``) the stats."""
        todo = list(requests)
        for r in todo:
            r.speculative = self.config
        runner = self.engine.draft
        assert runner is not None
        runner.stats = SpecStats()
        self.engine.run(todo, on_step)
        self.stats.merge(runner.stats)
        return runner.stats
