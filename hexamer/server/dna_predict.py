"""``/v1/dna/predict``: a fine-tuned head's predictions for sequences, on the raw label scale (class
probabilities for classification), as :meth:`hexamer.finetune.apply.Predictor.predict` gives them.

The head is a second model loaded beside the language model (``hexamer serve --head FOLDER``); a
server started without one answers 404 saying how to start one with it. The head runs as one job
on the engine thread, between decode steps, like scoring and VEP.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from starlette.requests import Request as HttpRequest
from starlette.responses import Response

from hexamer.finetune.data import normalize_dna
from hexamer.server.dna_requests import as_list, dna_problem, engine_job
from hexamer.server.errors import ApiError
from hexamer.server.schemas import DnaPredictRequest
from hexamer.server.state import ServerState
from hexamer.server.streaming import dumps, json_response

__all__ = ["NO_HEAD", "dna_predict"]

NO_HEAD = (
    "this server serves no fine-tuned head: /v1/dna/predict needs one; start the server with "
    "`hexamer serve --model BASE --head HEAD_FOLDER` (a folder written by hexamer finetune)"
)


def _clean(state: ServerState, seqs: list[str], limit: int) -> list[str]:
    """Sequences normalised as in training; a bad or too long one is a 400 naming it."""
    out = []
    for i, seq in enumerate(seqs):
        where = "sequences" if len(seqs) == 1 else f"sequences[{i}]"
        if len(seq) > state.settings.max_bp:
            raise ApiError(
                400,
                f"{where}: {len(seq)} bases exceed the server limit of {state.settings.max_bp}",
                "sequences",
            )
        problem = dna_problem(seq)
        if problem:
            raise ApiError(400, f"{where}: {problem}", "sequences")
        clean = normalize_dna(seq)
        if not clean:
            raise ApiError(400, f"{where}: empty sequence", "sequences")
        if len(clean) > limit:
            raise ApiError(
                400, f"{where}: {len(clean)} bp is longer than the head takes ({limit} bp)", "sequences"
            )
        out.append(clean)
    return out


async def dna_predict(state: ServerState, http: HttpRequest, body: DnaPredictRequest) -> Response:
    state.check_model(body.model)
    if state.head is None:
        raise ApiError(404, NO_HEAD)
    predictor = state.head
    if body.rc_average is not None and body.rc_average != predictor.rc_average:
        predictor = dataclasses.replace(predictor, rc_average=body.rc_average)
    seqs = as_list(body.sequences, "sequences", state.settings.max_prompts)
    clean = await state.offload(lambda: _clean(state, seqs, predictor.max_bp))
    values = await engine_job(state, http, lambda: predictor.predict(clean))
    columns = list(predictor.columns)
    data: list[dict[str, Any]] = [
        {
            "index": i,
            "values": {c: float(v) if math.isfinite(v) else None for c, v in zip(columns, row, strict=True)},
        }
        for i, row in enumerate(values)
    ]
    return json_response(
        dumps(
            {
                "object": "dna.predict",
                "model": state.model_name,
                "head": state.head_name,
                "task": predictor.task.kind,
                "columns": columns,
                "rc_average": predictor.rc_average,
                "data": data,
            }
        )
    )
