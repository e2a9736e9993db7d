"""DNA-native endpoints (``/v1/dna/score``, ``/v1/dna/vep``; ``/v1/dna/generate`` is in
:mod:`hexamer.server.dna_generate`) and
``/v1/embeddings``: thin layers over :class:`~hexamer.Carbon`, :mod:`hexamer.vep` and
:mod:`hexamer.embed`, so a server answer equals the library's for the same inputs and seeds.

Generation goes through the shared engine (it batches with completions); scoring, VEP and
embeddings run as one job each on the engine thread, between decode steps.
"""

from __future__ import annotations

import base64
import math
import secrets
import time
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
from starlette.requests import Request as HttpRequest
from starlette.responses import Response

from hexamer.backend.results import FailedResultWarning, ScoreResult, UnscoredSequenceWarning
from hexamer.embed import embed_sequences
from hexamer.embed.pooling import embedding_backend
from hexamer.io.vcf.records import classify
from hexamer.model.finite import non_finite_output
from hexamer.server.dna_requests import OFFLOAD_CHARS, as_list, dna_problem, engine_job, tag_prefix
from hexamer.server.errors import ApiError
from hexamer.server.response_size import check_response_values, score_terms
from hexamer.server.schemas import DnaScoreRequest, DnaVepRequest, EmbeddingRequest
from hexamer.server.state import ServerState
from hexamer.server.streaming import JsonPieces, dumps, json_number, json_response, json_stream
from hexamer.vep.recipes import WindowPair, pair_oov_bp, unscored_allele, variant_windows
from hexamer.vep.scoring import score_window_pairs
from hexamer.vep.settings import VepSettings, VepSettingsError

__all__ = ["dna_score", "dna_vep", "embeddings", "model_facts"]


# ---------------------------------------------------------------------------------------- score
def _check_sequences(state: ServerState, items: list[str], field: str, prefix: str) -> None:
    for i, seq in enumerate(items):  # lengths first: they cost nothing
        if len(seq) > state.settings.max_bp:
            where = field if len(items) == 1 else f"{field}[{i}]"
            raise ApiError(
                400, f"{where}: {len(seq)} bases exceed the server limit of {state.settings.max_bp}", field
            )
    for i, seq in enumerate(items):
        where = field if len(items) == 1 else f"{field}[{i}]"
        problem = dna_problem(seq)
        if problem:
            raise ApiError(400, f"{where}: {problem}", field)
        try:
            state.carbon.check_sequence(seq, prefix=prefix)
        except (ValueError, TypeError) as exc:
            raise ApiError(400, f"{where}: {exc}", field) from None


def _tokens(state: ServerState, seqs: list[str], prefix: str) -> int:
    extra = len(state.tokenizer.encode(prefix)) if prefix else 0
    k = state.carbon.layout.k
    return sum(extra + 1 + -(-len(s.strip()) // k) for s in seqs)


#: per-position values written per piece of a streamed score answer
_ARRAY_PIECE = 8192
#: padded tokens per scoring forward: its (rows, tokens, 4,096) logits and their FNS marginals are
#: what a score request's memory peaks on (demo model, 6 kb sequences: +540 MiB at Carbon.score's
#: 16,384, +180-210 MiB at 4,096, +120 MiB at 2,048)
SCORE_TOKEN_BUDGET = 2048


def _array_json(values: np.ndarray | None) -> JsonPieces | None:
    """``values`` as a JSON array (``null`` where a value is NaN or infinite: an unscored base),
    written lazily, a slice at a time, while the answer is sent."""
    if values is None:
        return None

    def write() -> Iterator[str]:
        yield "["
        for start in range(0, len(values), _ARRAY_PIECE):
            text = ",".join(map(json_number, values[start : start + _ARRAY_PIECE].tolist()))
            yield text if start == 0 else "," + text
        yield "]"

    return JsonPieces(write)


async def dna_score(state: ServerState, http: HttpRequest, body: DnaScoreRequest) -> Response:
    state.check_model(body.model)
    seqs = as_list(body.sequences, "sequences", state.settings.max_prompts)
    prefix = tag_prefix(body.tags, body.prefix)
    check_response_values(
        score_terms(
            [len(x) for x in seqs], level=body.level, k=state.carbon.layout.k, per_position=body.per_position
        ),
        state.settings.max_response_values,
        "send fewer or shorter sequences per request, or leave per_position off",
    )
    if sum(len(x) for x in seqs) > OFFLOAD_CHARS:
        await state.offload(lambda: _check_sequences(state, seqs, "sequences", prefix))
    else:
        _check_sequences(state, seqs, "sequences", prefix)

    def score_all() -> list[ScoreResult]:
        with warnings.catch_warnings():  # unscored and failed items say so in their status
            warnings.simplefilter("ignore", UnscoredSequenceWarning)
            warnings.simplefilter("ignore", FailedResultWarning)
            return state.carbon.score(  # type: ignore[return-value]
                seqs, level=body.level, method=body.method, prefix=prefix, token_budget=SCORE_TOKEN_BUDGET
            )

    results = await engine_job(state, http, score_all)
    assert isinstance(results, list)
    data = []
    for i, r in enumerate(results):
        arr = r.per_base if body.level == "bp" else r.per_token
        item: dict[str, Any] = {
            "index": i,
            "status": r.status,
            "reason": r.reason,
            "mean": r.mean if r.status == "ok" else None,
            "sum": r.sum if r.status == "ok" else None,
            "n_scored": r.n_scored,
            "n_oov_bases": r.n_oov_bases,
        }
        if body.per_position:
            item["per_base" if body.level == "bp" else "per_token"] = _array_json(arr)
        data.append(item)
    state.metrics.scored_bp.inc(sum(len(s.strip()) for s in seqs))
    tokens = _tokens(state, seqs, prefix)
    http.state.usage = {"prompt_tokens": tokens}
    return json_stream(  # written on worker threads while it is sent: per-base arrays of megabases
        {
            "object": "dna.score",
            "model": state.model_name,
            "level": body.level,
            "method": body.method,
            "data": data,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        },
        trim=True,  # the scoring forwards freed far more than the answer takes
    )


# ---------------------------------------------------------------------------------------- vep
async def dna_vep(state: ServerState, http: HttpRequest, body: DnaVepRequest) -> Response:
    """Window recipe of :mod:`hexamer.vep.recipes`: LL(alt window) - LL(ref window), with the
    same rules and the same shared-prefix scorer as ``hexamer vep``
    (:func:`hexamer.vep.scoring.score_window_pairs`: equal-length indel windows; ``skipped`` with a
    reason for ALT equal to REF, N alleles and variants whose bases share a 6-mer with an N). The
    window is checked and fitted to the model by :meth:`hexamer.vep.VepSettings.checked`, as the
    CLI's is: the response gives the window used and the notes saying what was cut."""
    state.check_model(body.model)
    if not body.variants:
        raise ApiError(400, "variants: give at least one variant", "variants")
    if len(body.variants) > state.settings.max_prompts:
        raise ApiError(
            400,
            f"variants: {len(body.variants)} exceed the limit of {state.settings.max_prompts}",
            "variants",
        )
    notes: list[str] = []
    try:  # the rules of ``hexamer vep``: the shortest window, and a window fitted to the model
        settings = VepSettings(window=body.window, rc_average=body.rc_average)
        settings = settings.checked(state.carbon, on_note=notes.append)
    except VepSettingsError as exc:
        raise ApiError(400, str(exc), exc.field) from None
    except ValueError as exc:
        raise ApiError(400, str(exc), "window") from None
    k = state.carbon.layout.k
    limit = k * (state.carbon.backend.max_prompt_tokens - 1)  # the most bases a window holds
    rows: list[dict[str, Any]] = []
    work: list[tuple[int, WindowPair]] = []
    for i, v in enumerate(body.variants):
        row: dict[str, Any] = {"index": i, "id": v.id, "status": "ok", "score": None, "reason": None}
        rows.append(row)
        seq = v.sequence.strip().upper()
        ref, alt = v.ref.strip().upper(), v.alt.strip().upper()
        p0 = v.pos - body.position_base
        problem = dna_problem(seq)
        if problem:
            raise ApiError(400, f"variants[{i}].sequence: {problem}", "variants")
        if len(seq) > state.settings.max_bp:
            raise ApiError(
                400,
                f"variants[{i}].sequence: {len(seq)} bases exceed the limit of {state.settings.max_bp}",
                "variants",
            )
        if not ref or not alt or set(ref + alt) - set("ACGTN"):
            row.update(
                status="failed", reason=f"ref {v.ref!r} and alt {v.alt!r} must be non-empty A/C/G/T/N alleles"
            )
            continue
        _, skip = classify(ref, alt)
        if skip is not None:  # ALT equal to REF: nothing to score
            row.update(status="skipped", reason=skip)
            continue
        if not 0 <= p0 <= len(seq) - len(ref):
            row.update(
                status="failed",
                reason=f"pos {v.pos} ({body.position_base}-based) puts ref outside the sequence of {len(seq)} bp",
            )
            continue
        if seq[p0 : p0 + len(ref)] != ref:
            row.update(
                status="ref_mismatch",
                reason=f"sequence has {seq[p0 : p0 + len(ref)]!r} at pos {v.pos}, not ref {ref!r}",
            )
            continue
        if "N" in ref + alt:
            row.update(
                status="skipped",
                reason="allele contains N: its 6-mer would be <oov> and its bases not scored",
            )
            continue
        pair = variant_windows(
            lambda a, b, seq=seq: seq[a:b], p0, ref, alt, len(seq), settings.window, 1, limit
        )
        if pair is None:
            row.update(
                status="skipped",
                reason=f"the sequence ({len(seq)} bp) is too short to give this indel's ref and alt windows "
                "the same number of bases",
            )
            continue
        n_oov = pair_oov_bp(pair, rc_average=body.rc_average, k=k)
        row.update(
            window_start=pair.start,
            window_end=pair.start + len(pair.ref),
            n_scored_bp=len(pair.ref) - n_oov,
            n_oov_bp=n_oov,
        )
        unscored = unscored_allele(pair, rc_average=body.rc_average, k=k)
        if unscored is not None:
            row.update(status="skipped", reason=unscored)
            continue
        work.append((i, pair))

    def score_all() -> list[float]:
        return score_window_pairs(state.carbon, [p for _, p in work], rc_average=body.rc_average)

    scores = await engine_job(state, http, score_all) if work else []
    for (i, pair), score in zip(work, scores, strict=True):
        if math.isfinite(score):
            rows[i]["score"] = float(score)
        else:  # a NaN/inf model output: a failed row, as hexamer vep writes it
            rows[i].update(status="failed", reason=non_finite_output("score"))
        state.metrics.scored_bp.inc(len(pair.ref))
    http.state.usage = {"variants": len(rows)}
    return json_response(
        dumps(
            {
                "object": "dna.vep",
                "model": state.model_name,
                "recipe": "window",
                "window": settings.window,
                "notes": notes,
                "rc_average": body.rc_average,
                "position_base": body.position_base,
                "data": rows,
            }
        )
    )


# ---------------------------------------------------------------------------------------- embeddings
async def embeddings(state: ServerState, http: HttpRequest, body: EmbeddingRequest) -> Response:
    state.check_model(body.model)
    raw = body.input
    if isinstance(raw, str):
        items = [raw]
    elif raw and all(isinstance(x, str) for x in raw):
        items = list(raw)  # type: ignore[arg-type]
    elif not raw:
        raise ApiError(400, "input: give at least one sequence", "input")
    else:
        raise ApiError(400, "input: token-id input is not supported; send DNA sequences as strings", "input")
    if len(items) > state.settings.max_prompts:
        raise ApiError(
            400, f"input: {len(items)} sequences exceed the limit of {state.settings.max_prompts}", "input"
        )
    hidden = embedding_backend(state.carbon).hidden_size
    if body.dimensions is not None and body.dimensions != hidden:
        raise ApiError(400, f"dimensions: this model's embeddings have {hidden} dimensions", "dimensions")
    for i, seq in enumerate(items):
        where = "input" if len(items) == 1 else f"input[{i}]"
        if len(seq) > state.settings.max_bp:  # before any scan of the text
            raise ApiError(
                400, f"{where}: {len(seq)} bases exceed the limit of {state.settings.max_bp}", "input"
            )
        if not seq.strip():
            raise ApiError(400, f"{where}: the sequence is empty", "input")
        problem = dna_problem(seq)
        if problem:
            raise ApiError(400, f"{where}: {problem}", "input")
    prefix = tag_prefix(None, body.prefix)
    errors: list[str] = []
    try:  # the options are checked here, before the engine thread is asked for anything
        out = embed_sequences(
            state.carbon, [(str(i), s) for i, s in enumerate(items)], pool=body.pool, layer=body.layer,
            prefix=prefix, max_tokens=body.max_tokens, chunk_overlap=body.chunk_overlap,
            on_error=lambda rid, reason: errors.append(f"input[{rid}]: {reason}"),
        )  # fmt: skip
    except ValueError as exc:
        field = next((f for f in ("chunk_overlap", "max_tokens", "layer") if f in str(exc)), None)
        raise ApiError(400, str(exc), field) from None

    def run() -> list[np.ndarray | None]:
        return [vec for _, vec in out]

    vectors = await engine_job(state, http, run)
    spoiled = [e for e in errors if non_finite_output("embedding") in e]
    if spoiled:  # the model's fault, not the input's
        raise ApiError(500, spoiled[0], "input")
    if errors:
        raise ApiError(400, errors[0], "input")
    data = []
    for i, vec in enumerate(vectors):
        assert vec is not None
        v = vec.astype(np.float32)
        if body.normalize:
            v = v / max(float(np.linalg.norm(v)), 1e-12)
        emb: Any = (
            base64.b64encode(v.astype("<f4").tobytes()).decode()
            if body.encoding_format == "base64"
            else JsonPieces(lambda v=v: [dumps(v.tolist())])  # written off the event loop
        )
        data.append({"index": i, "object": "embedding", "embedding": emb})
    tokens = _tokens(state, items, prefix) + len(items)
    http.state.usage = {"prompt_tokens": tokens}
    return json_stream(  # 256 vectors of a 3B model's 3,072 floats: written on worker threads
        {
            "id": f"embd-{secrets.token_hex(12)}",
            "object": "list",
            "created": int(time.time()),
            "model": state.model_name,
            "data": data,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
    )


def model_facts(state: ServerState) -> dict[str, int]:
    """What ``/v1/models`` tells a hexamer client beyond vLLM's fields: the embeddings' size and
    layers (``Carbon.from_server(...).embed`` checks ``layer`` against them) and the request limits
    it splits its work by."""
    backend = embedding_backend(state.carbon)
    return {
        "hidden_size": backend.hidden_size,
        "num_layers": backend.num_layers,
        "max_prompts": state.settings.max_prompts,
        "max_bp": state.settings.max_bp,
        "max_body_bytes": state.settings.max_body_bytes,
    }
