"""Variant scoring at throughput: batching, shared reference windows and KV-cache prefix reuse.

The recipes are defined in :mod:`hexamer.vep.recipes`; this module computes the same numbers with
far fewer model tokens:

* **Window recipe.** All windows of one site (the ref window and every alt window of every
  record at that position) agree up to the 6-mer holding the first changed base. That shared
  prefix is run once, its KV cache shared by one row per window (a block-table fork: the
  prefix's blocks are stored once), and only the differing suffixes are run, batched across sites. Only the suffix's per-base log-probabilities enter the score:
  the prefix's are the same in every window and cancel in ``LL(alt) - LL(ref)``.
* **Next-base recipe.** Variants whose contexts start at the same base (same 6-mer phase, within
  one grid step, see :func:`~hexamer.vep.recipes.context_anchor`) are one group. Each site's
  context is then a prefix of the group's sequence (start to last site), so one causal forward over
  that sequence reads every site's next-base distribution at the position just before it; every
  ALT of a site uses the same logits. N variants in a cluster cost about one context forward plus
  the gaps between them instead of N context forwards.

Work is cut into *units* (a few sites or groups) that depend only on the input, never on what was
already done, so a resumed run recomputes exactly what an uninterrupted one computed and gets
bit-identical numbers. A unit that raises marks its rows ``failed``; the job goes on.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import fields as dataclass_fields
from typing import TYPE_CHECKING, Any

from hexamer.batching import batched
from hexamer.engine.batching import padded_chunks
from hexamer.io.reference import Reference
from hexamer.io.vcf.reader import read_vcf
from hexamer.io.vcf.records import VcfRecord
from hexamer.vep.planner import Planner
from hexamer.vep.recipes import WindowPair, window_tokens
from hexamer.vep.rows import Key, Row, result_row
from hexamer.vep.runner import Runner, window_pair_scores
from hexamer.vep.settings import ContigRenameWarning, VepSettings, default_token_budget, warn_at_caller
from hexamer.vep.units import RunnerFactory, UnitRunner

if TYPE_CHECKING:
    from hexamer.carbon import Carbon

__all__ = [
    "iter_record_blocks",
    "score_variants",
    "score_window_pairs",
    "settings_from",
]

PathLike = str | os.PathLike[str]


def settings_from(settings: VepSettings | None, fields: Mapping[str, Any]) -> VepSettings:
    """``settings``, or a :class:`VepSettings` of the keyword ``fields`` (the older way to call);
    both at once, or a keyword that is not a field, is a ``TypeError``."""
    names = {f.name for f in dataclass_fields(VepSettings)}
    unknown = sorted(set(fields) - names)
    if unknown:
        raise TypeError(
            f"unknown VEP setting(s): {', '.join(unknown)} (VepSettings has {', '.join(sorted(names))})"
        )
    if settings is not None and fields:
        raise TypeError(
            f"give settings=VepSettings(...) or the keywords {', '.join(sorted(fields))}, not both"
        )
    return settings if settings is not None else VepSettings(**fields)


def score_window_pairs(
    carbon: Carbon,
    pairs: Sequence[WindowPair],
    *,
    rc_average: bool = False,
    batch_size: int = 8,
    token_budget: int | None = None,
    naive: bool = False,
) -> list[float]:
    """The window score ``LL(alt) - LL(ref)`` of each pair (:func:`~hexamer.vep.recipes.variant_windows`),
    computed as :func:`score_variants` computes it: pairs with the same ref window (``start`` and
    bases) are one site whose windows share a prefix forward, and consecutive sites are cut into
    units of at most ``batch_size`` windows and ``token_budget`` padded tokens (default by
    device, as :class:`VepSettings`). On a served model each window is one request."""
    if batch_size < 1 or (token_budget is not None and token_budget < 1):
        raise ValueError("batch_size and token_budget must be >= 1")
    backend = carbon.backend
    budget = token_budget if token_budget is not None else default_token_budget(backend.device.type)
    sites: dict[tuple[int, str], list[int]] = {}
    for i, p in enumerate(pairs):
        sites.setdefault((p.start, p.ref), []).append(i)
    strands = 2 if rc_average else 1
    k = backend.layout.k
    scores: list[float] = [0.0] * len(pairs)
    members = list(sites.values())
    for unit in padded_chunks(
        members,
        [window_tokens(max(max(len(pairs[i].ref), len(pairs[i].alt)) for i in site), k) for site in members],
        rows=[strands * (1 + len({pairs[i].alt for i in site})) for site in members],
        token_budget=budget,
        max_rows=batch_size,
    ):
        out = window_pair_scores(
            backend,
            [[pairs[i] for i in site] for site in unit],
            rc_average=rc_average,
            batch_size=batch_size,
            token_budget=budget,
            naive=naive,
        )
        for site, values in zip(unit, out, strict=True):
            for i, value in zip(site, values, strict=True):
                scores[i] = value
    return scores


def _default_note(message: str) -> None:
    warn_at_caller(message, ContigRenameWarning)


def iter_record_blocks(
    carbon: Carbon,
    records: Iterable[VcfRecord],
    reference: Reference,
    settings: VepSettings,
    *,
    done: Mapping[Key, Row] | None = None,
    naive: bool = False,
    on_progress: Callable[[int], None] | None = None,
    on_note: Callable[[str], None] | None = None,
    make_runner: RunnerFactory | None = None,
) -> Iterator[Iterator[list[Row]]]:
    """Per block of ``records``, an iterator over the row lists of its units (the resume layer's
    view). A unit whose every key is in ``done`` is not recomputed: its rows come from ``done``.
    ``settings`` are checked here unless they come from :meth:`VepSettings.checked` already.
    A record's ``index`` is its record number in the whole input (:func:`read_vcf` numbers them),
    so a shard of a VCF scored elsewhere gets the blocks, work units and numbers of a run over the
    whole file when it starts on a block boundary (a multiple of ``settings.block_records``).
    ``make_runner(reference, settings)`` gives the model work of the units (default: a
    :class:`~hexamer.vep.runner.Runner` on ``carbon.backend``; a fine-tuned head brings its own,
    :mod:`hexamer.finetune.effects`), so every other step is the one ``hexamer vep`` takes."""
    if not settings.is_checked:
        settings = settings.checked(carbon, on_note=on_note)
    planner = Planner(carbon.backend, reference, settings, on_note or _default_note)
    runner: UnitRunner
    if make_runner is None:
        runner = Runner(carbon.backend, reference, settings, naive)
    else:
        runner = make_runner(reference, settings)
    return (
        _block_units(planner, runner, b, done, on_progress) for b in batched(records, settings.block_records)
    )


def _block_units(
    planner: Planner,
    runner: UnitRunner,
    block: list[VcfRecord],
    done: Mapping[Key, Row] | None,
    on_progress: Callable[[int], None] | None,
) -> Iterator[list[Row]]:
    rows, scorable = planner.plan(block)
    if rows:
        if on_progress is not None:
            on_progress(len(rows))
        yield rows
    for unit in planner.units(scorable):
        if done is not None and all(key in done for key in unit.keys):
            rows = [done[key] for key in unit.keys]
        else:
            try:
                rows = runner.run(unit)
            except Exception as exc:  # one unit's failure must not end the job
                reason = f"scoring failed: {type(exc).__name__}: {exc}"
                rows = [result_row(v, planner.s.recipe, "failed", reason=reason) for v in unit.variants]
        if on_progress is not None:
            on_progress(len(rows))
        yield rows


def score_variants(
    carbon: Carbon,
    vcf: PathLike,
    fasta: PathLike,
    *,
    settings: VepSettings | None = None,
    naive: bool = False,
    on_progress: Callable[[int], None] | None = None,
    on_note: Callable[[str], None] | None = None,
    renames: PathLike | Mapping[str, str] | None = None,
    **fields: Any,
) -> Iterator[Row]:
    """Score every ALT allele of every record of a VCF/BCF against a reference FASTA.

    Yields one row per (record, ALT) in input order, for every input record (malformed, symbolic,
    mismatching ones included), with the columns :data:`ROW_COLUMNS`; ``status`` is one of
    :data:`STATUSES` and ``reason`` says why a row was not scored. Scores: window recipe
    ``LL(alt) - LL(ref)`` over windows of equal length, next-base ``log P(ref) - log P(alt)``
    (definitions in :mod:`hexamer.vep.recipes`); a variant whose bases share a 6-mer with an
    ``N`` is ``skipped``. ``n_scored_bp``/``n_oov_bp``: bases of the windows (or context) scored
    and lost to ``<oov>`` 6-mers. A window or context too long for the model is cut to fit, with
    a note. ``naive=True`` computes the same scores the slow, obvious way (one
    full forward per window or per ALT), for tests and benchmarks. ``on_progress(n)`` is called
    with the number of rows each finished unit produced; ``on_note(message)`` receives notes such
    as contig renames (default: a :class:`ContigRenameWarning`). ``renames`` maps VCF contig
    names to FASTA ones (a bcftools ``--rename-chrs`` file or a dict). A bad file raises at the call.

    ``settings`` (a :class:`VepSettings`) decides the numbers; its fields may instead be given as
    keywords (``recipe="next_base"``, ``window=...``, ...), not both.
    """
    settings = settings_from(settings, fields).checked(carbon, on_note=on_note)
    reference = Reference(fasta, renames=renames)
    try:
        blocks = iter_record_blocks(
            carbon, read_vcf(vcf), reference, settings, naive=naive, on_progress=on_progress, on_note=on_note
        )
    except BaseException:
        reference.close()
        raise
    return _ordered_rows(blocks, reference)


def _ordered_rows(blocks: Iterator[Iterator[list[Row]]], reference: Reference) -> Iterator[Row]:
    with reference:
        for units in blocks:
            rows = [row for unit in units for row in unit]
            rows.sort(key=lambda r: (r["record"], r["alt_index"]))
            yield from rows
