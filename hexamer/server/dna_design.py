"""``/v1/dna/design``: sequences under hard constraints (:func:`hexamer.design.design`: sampling, beam
search, best-of-N, diversity) or optimised for an oracle (:func:`hexamer.design.optimise.job.
optimise_design`: evolution, annealing, minimal edits) — the served head (``hexamer serve --head``),
a position weight matrix or a motif sent in the request.

Work is bounded before it starts: the length (``max_design_bp``), the sequences decoded or kept at
once (``max_design_candidates``), the optimiser's rounds or steps (``max_design_steps``); the rules
are compiled (and an unsatisfiable set named, 400) on the preparation threads. The design then runs
as one job on the engine thread (it owns the model) and checks its deadline (``design_timeout_s``,
or the request's timeout if sooner) at every 6-mer and optimiser step: past it the job stops and
the answer is a 504. The event loop never waits on it, so ``/health`` answers during a design.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request as HttpRequest
from starlette.responses import Response

from hexamer.design import DesignConstraints, DesignError, DesignOptions, compile_constraints, design
from hexamer.design.api import Candidate
from hexamer.design.optimise.job import OptimiseOptions, check_start, optimise_design
from hexamer.design.optimise.oracles import HeadOracle, MotifCountOracle, Oracle, PwmOracle
from hexamer.server.dna_predict import NO_HEAD
from hexamer.server.dna_requests import engine_job
from hexamer.server.errors import ApiError
from hexamer.server.schemas import DesignOracle, DnaDesignRequest
from hexamer.server.state import ServerState
from hexamer.server.streaming import dumps, json_response

__all__ = ["dna_design"]

_OPTIMISERS = ("evolve", "anneal", "minimal-edit")


class _Late(Exception):
    """The design's deadline passed (raised inside the job, answered 504)."""


def _limits(state: ServerState, body: DnaDesignRequest) -> None:
    """The server's bounds on the work, checked before anything is parsed."""
    s = state.settings
    length = body.length if body.length is not None else len((body.start or "").strip())
    if length > s.max_design_bp:
        raise ApiError(
            400, f"length: {length} bases exceed the server's design limit of {s.max_design_bp}", "length"
        )
    for name, value in (
        ("n * oversample", body.n * body.oversample), ("width", body.width), ("keep", body.keep)
    ):  # fmt: skip
        if value > s.max_design_candidates:
            raise ApiError(
                400, f"{name}: {value} exceeds the server's max_design_candidates of {s.max_design_candidates}",
                name.split()[0],
            )  # fmt: skip
    for name, value in (("rounds", body.rounds), ("steps", body.steps)):
        if value > s.max_design_steps:
            raise ApiError(
                400, f"{name}: {value} exceeds the server's max_design_steps of {s.max_design_steps}", name
            )
    rules = len(body.avoid) + len(body.avoid_sites) + len(body.motifs) + len(body.frozen)
    if rules > s.max_design_bp:
        raise ApiError(400, f"{rules} patterns, sites, motifs and frozen positions are too many", "avoid")
    width = len(body.oracle.matrix or ()) if body.oracle is not None else 0
    if width > s.max_design_bp:
        raise ApiError(400, f"oracle.matrix: {width} rows exceed {s.max_design_bp}", "oracle")


def _oracle(state: ServerState, spec: DesignOracle) -> Oracle:
    if spec.kind == "head":
        if state.head is None:
            raise ApiError(400, NO_HEAD.replace("/v1/dna/predict", "a head oracle"), "oracle")
        return HeadOracle(state.head, spec.target, specificity=spec.specificity)
    if spec.kind == "pwm":
        if spec.matrix is None:
            raise ValueError("oracle.matrix: a pwm oracle needs its (width, 4) matrix")
        mode = "max" if spec.threshold is None else "count"
        if spec.counts:
            return PwmOracle.from_counts(spec.matrix, mode=mode, threshold=spec.threshold)
        return PwmOracle(spec.matrix, mode=mode, threshold=spec.threshold)
    if not spec.motif:
        raise ValueError("oracle.motif: a motif oracle needs its IUPAC motif")
    return MotifCountOracle(spec.motif)


def _prepare(state: ServerState, body: DnaDesignRequest) -> dict[str, Any]:
    """Rules, options and oracle checked and compiled (preparation threads); 400 naming what is wrong."""
    try:
        gc = body.gc
        if gc is not None and len(gc) != 2:
            raise DesignError(f"gc: give [min, max], got {len(gc)} numbers")
        length = body.length if body.length is not None else len((body.start or "").strip())
        if not length:
            raise DesignError("length: required (optimisers may take it from start)")
        spec = DesignConstraints(
            length, mask=body.mask, prefix=body.prefix, suffix=body.suffix,
            motifs=tuple((m.position, m.motif) for m in body.motifs), avoid=tuple(body.avoid),
            avoid_sites=tuple(body.avoid_sites), max_homopolymer=body.max_homopolymer,
            gc=(gc[0], gc[1]) if gc is not None else None, gc_window=body.gc_window,
            translate_to=body.translate_to,
        )  # fmt: skip
        constraints = compile_constraints(spec)
        if body.method not in _OPTIMISERS:
            options = DesignOptions(
                n=body.n, method=body.method, temperature=body.temperature, top_p=body.top_p,  # type: ignore[arg-type]
                oversample=body.oversample, width=body.width, min_distance=body.min_distance, seed=body.seed,
            )  # fmt: skip
            return {"constraints": constraints, "options": options}
        if body.oracle is None:
            raise DesignError(f"oracle: method {body.method} needs an oracle (head, pwm or motif)")
        opt = OptimiseOptions(
            method=body.method, weight=body.weight, n=body.n, keep=body.keep, rounds=body.rounds,
            steps=body.steps, t_start=body.t_start, t_end=body.t_end, seed=body.seed,
            max_edits=body.max_edits, frozen=tuple(body.frozen),
        )  # fmt: skip
        opt.check(length)
        start = check_start(spec, body.start) if body.start is not None else None
        return {"spec": spec, "options": opt, "start": start, "oracle": _oracle(state, body.oracle)}
    except ValueError as exc:  # DesignError, UnsatisfiableError, a bad matrix or head target
        raise ApiError(400, str(exc)) from None


def _candidate(c: Candidate, index: int, per_base: bool) -> dict[str, Any]:
    row = c.row(f"design_{index + 1}", per_base)
    checks = {r.name: {"value": row[r.name], "pass": r.passed} for r in c.checks}
    out = {k: v for k, v in row.items() if k not in checks and not k.endswith("_pass")}
    return {"index": index, **out, "checks": checks}


def _run(
    state: ServerState, body: DnaDesignRequest, prepared: dict[str, Any], deadline: float
) -> dict[str, Any]:
    """The design job (engine thread): stops with :class:`_Late` once ``deadline`` passes."""

    def guard(*_: object) -> None:
        if time.monotonic() >= deadline:
            raise _Late

    if "constraints" in prepared:
        result = design(state.carbon, prepared["constraints"], prepared["options"], on_progress=guard)
        return {"summary": result.summary(), "candidates": result.candidates}
    run = optimise_design(
        state.carbon, prepared["spec"], prepared["oracle"], prepared["options"], start=prepared["start"],
        on_step=guard,
    )  # fmt: skip
    return {
        "summary": run.summary(),
        "candidates": run.candidates,
        "trajectory": run.run.rows(),
        "start": run.start,
    }


async def dna_design(state: ServerState, http: HttpRequest, body: DnaDesignRequest) -> Response:
    state.check_model(body.model)
    _limits(state, body)
    prepared = await state.offload(lambda: _prepare(state, body))
    deadline = min(state.deadline(http.scope), _arrival(state, http) + state.settings.design_timeout_s)
    try:
        out = await engine_job(state, http, lambda: _run(state, body, prepared, deadline))
    except _Late:
        raise ApiError(
            504,
            f"the design stopped after {state.settings.design_timeout_s:g} s (the server's design_timeout_s): "
            "ask for a shorter sequence, fewer candidates or fewer steps",
        ) from None
    answer: dict[str, Any] = {
        "object": "dna.design",
        "model": state.model_name,
        "method": body.method,
        "summary": out["summary"],
        "candidates": [_candidate(c, i, body.per_base) for i, c in enumerate(out["candidates"])],
    }
    if "trajectory" in out:
        answer["start"] = out["start"]
        answer["trajectory"] = out["trajectory"]
    return json_response(dumps(answer))


def _arrival(state: ServerState, http: HttpRequest) -> float:
    return state.deadline(http.scope) - state.settings.request_timeout_s
