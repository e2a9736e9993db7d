"""The VEP recipes the way the public Carbon evaluation scripts run them: ``transformers``, full vocab.

Why this exists: ``hexamer bench vep`` times the engine against its own naive recipe, which
already uses hexamer's model and computes only the 4,096 6-mer rows of the LM head. What users run
today is the published scripts: ``LlamaForCausalLM.from_pretrained(folder)(input_ids).logits``,
i.e. the logits of the whole vocabulary (155,776 ids for Carbon) at every position, one forward
per window or context, then the FNS marginalisation. This module is that baseline, computing the
*same numbers* as :func:`hexamer.vep.score_variants`, so the benchmark can time it and check the
scores key by key.

* Like the scripts: the model is ``transformers.LlamaForCausalLM`` on the same folder (no remote
  code); every variant (VCF record x ALT) is scored on its own, as one row of the scripts' tables:
  a ref and an alt window forward (four with ``rc_average``), or one context forward; the full
  logits are computed and the 6-mer block sliced out afterwards.
* Like hexamer's recipes (:mod:`hexamer.vep.recipes`), on purpose: ids from hexamer's k-mer codec
  (identical to the tokenizer's), bp-level FNS over the DNA rows only, LL summed in float64,
  window bounds and alt windows, reverse-complement averaging, and the next-base context rules
  (grid-aligned anchors, leading ``N`` dropped, variant kept on a 6-mer boundary). Both recipes
  are reproduced exactly; ``tests/bench/baselines/test_published_vep.py`` checks them against the engine (window
  with and without ``rc_average``, next-base with contexts that start in an ``N`` run).
* Which variants: those the engine scores with ``status == "ok"``: the window recipe scores every
  sequence change (SNVs, MNVs, indels), the next-base recipe SNVs only. (The engine also skips a
  variant whose bases share a 6-mer with an ``N``; this baseline still scores it, as the scripts
  do, so it may return a few more keys.)
* **Indels differ on purpose.** Like the scripts, the alt window here is the ref window with REF
  replaced by ALT, so an indel's two windows hold different numbers of bases and the summed LL
  difference mostly measures that length (a 1.2 kb deletion scores ~ +1,700). The engine gives
  both windows the same number of bases (:func:`hexamer.vep.recipes.window_pair_bounds`), so for
  indels the two disagree; SNVs and MNVs agree to rounding, and the benchmark compares those.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import torch

from hexamer.fns import log_base_marginals
from hexamer.fns.likelihood import bp_log_likelihood
from hexamer.fns.tables import BASE_INDEX
from hexamer.io import reverse_complement
from hexamer.io.reference import Reference
from hexamer.io.vcf.reader import read_vcf
from hexamer.io.vcf.records import Variant
from hexamer.tokenizer import CarbonTokenizer
from hexamer.tokenizer.dna import encode_dna, encode_kmers
from hexamer.vep.recipes import (
    alt_window,
    context_anchor,
    context_start,
    leading_n,
    window_bounds,
    window_tokens,
)
from hexamer.vep.settings import VepSettings

__all__ = ["PublishedScorer", "published_scores"]

PathLike = str | os.PathLike[str]
Key = tuple[int, int]


class PublishedScorer:
    """A ``transformers`` Llama on a Carbon folder, scoring variants as the published scripts do.

    Load once (``from_pretrained`` is not part of a timed run), then call :meth:`scores`.
    """

    def __init__(
        self,
        folder: PathLike,
        *,
        dtype: str | torch.dtype = "float32",
        device: str | torch.device | None = None,
    ) -> None:
        import transformers

        from hexamer.tokenizer.folder import resolve_model_dir

        path = resolve_model_dir(folder)
        from hexamer.model.quant import refuse_int8_folder

        refuse_int8_folder(path, "the published transformers path")
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        torch_dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
        transformers.utils.logging.disable_progress_bar()
        # transformers >= 4.56 (the hf extra's floor) names it ``dtype``; ``torch_dtype`` is deprecated
        model = transformers.LlamaForCausalLM.from_pretrained(path, dtype=torch_dtype)
        self.model = model.to(torch.device(device)).eval()
        self.device = torch.device(device)
        self.tokenizer = CarbonTokenizer.from_pretrained(path)
        self.layout = self.tokenizer.layout
        self.context_length = int(model.config.max_position_embeddings)

    # ------------------------------------------------------------------ one forward
    @torch.inference_mode()
    def _logits(self, ids: list[int]) -> torch.Tensor:
        """``(T, V)`` full-vocabulary logits of one prompt, as ``model(input_ids).logits`` gives."""
        x = torch.tensor([ids], dtype=torch.int64, device=self.device)
        return self.model(input_ids=x).logits[0]

    def window_ll(self, seq: str) -> float:
        """LL of ``<dna>seq`` (the window recipe's term): full logits, then the 6-mer block."""
        lay = self.layout
        enc = encode_dna(seq, lay)
        logits = self._logits([lay.begin_id, *enc.ids.tolist()])
        kmer = logits[:-1, lay.kmer_start : lay.kmer_stop]  # position t predicts token t + 1
        return bp_log_likelihood(kmer, enc.ids - lay.kmer_start, enc.n_real)

    def next_base_log_marginal(self, context: str) -> torch.Tensor:
        """float64 ``log P_0(b)`` (ATCG order) of the base after ``<dna>context``."""
        lay = self.layout
        logits = self._logits([lay.begin_id, *encode_kmers(context, lay).tolist()])
        return log_base_marginals(logits[-1, lay.kmer_start : lay.kmer_stop].double())[0].cpu()

    # ------------------------------------------------------------------ variants
    def scores(self, vcf: PathLike, fasta: PathLike, **settings: Any) -> dict[Key, float]:
        """``{(record, alt_index): score}`` for every variant the engine would score ``ok`` with
        the same :class:`~hexamer.vep.settings.VepSettings` fields (``recipe``, ``window``,
        ``window_grid``, ``context``, ``context_grid``, ``rc_average``; the engine's batching
        knobs are accepted and have no effect here)."""
        s = VepSettings(**settings).checked_for("cpu", self.context_length, self.layout.k)
        out: dict[Key, float] = {}
        with Reference(fasta) as ref:
            for v, contig in self._scorable(vcf, ref, s):
                if s.recipe == "window":
                    out[v.key] = self._window_score(ref, contig, v, s)
                else:
                    out[v.key] = self._next_base_score(ref, contig, v, s)
        return out

    def _window_score(self, ref: Reference, contig: str, v: Variant, s: VepSettings) -> float:
        start, end = window_bounds(v.start, len(v.ref), ref.lengths[contig], s.window, s.window_grid)
        ref_win = ref.fetch(contig, start, end)
        alt_win = alt_window(ref_win, v.start - start, v.ref, v.alt)
        delta = self.window_ll(alt_win) - self.window_ll(ref_win)
        if s.rc_average:
            rc = self.window_ll(reverse_complement(alt_win)) - self.window_ll(reverse_complement(ref_win))
            delta = (delta + rc) / 2
        return delta

    def _next_base_score(self, ref: Reference, contig: str, v: Variant, s: VepSettings) -> float:
        k = self.layout.k
        anchor = context_anchor(v.start, s.context, s.context_grid, k)
        start = context_start(anchor, v.start, leading_n(ref.fetch(contig, anchor, v.start)), k)
        first = self.next_base_log_marginal(ref.fetch(contig, start, v.start))
        return float(first[BASE_INDEX[v.ref]] - first[BASE_INDEX[v.alt]])

    def _scorable(self, vcf: PathLike, ref: Reference, s: VepSettings) -> Iterator[tuple[Variant, str]]:
        """The engine's planning rules (``Planner.plan``), variant by variant: the ``ok`` ones."""
        for rec in read_vcf(vcf):
            for v in rec.variants():
                if v.error is not None or v.skip is not None:
                    continue
                contig, _ = ref.resolve(v.chrom)
                if contig is None:
                    continue
                length = ref.lengths[contig]
                if v.start + len(v.ref) > length or ref.fetch(contig, v.start, v.start + len(v.ref)) != v.ref:
                    continue  # ref_mismatch
                if "N" in v.ref or "N" in v.alt:
                    continue
                if s.recipe == "next_base":
                    if v.kind == "SNV":
                        yield v, contig
                    continue
                start, end = window_bounds(v.start, len(v.ref), length, s.window, s.window_grid)
                n = (end - start) - len(v.ref) + len(v.alt)
                if window_tokens(max(n, end - start), self.layout.k) <= self.context_length:
                    yield v, contig


def published_scores(
    folder: PathLike,
    vcf: PathLike,
    fasta: PathLike,
    *,
    dtype: str = "float32",
    device: str | torch.device | None = None,
    **settings: Any,
) -> dict[Key, float]:
    """Load ``folder`` with ``transformers`` and score ``vcf`` as the published scripts do.

    Returns ``{(record, alt_index): score}``, the keys and (to rounding) the scores of the ``ok``
    rows of :func:`hexamer.vep.score_variants` with the same options (``recipe``, ``window``,
    ``window_grid``, ``context``, ``context_grid``, ``rc_average``). Needs ``transformers``
    (``pip install 'hexamer[hf]'``).
    """
    return PublishedScorer(folder, dtype=dtype, device=device).scores(vcf, fasta, **settings)
