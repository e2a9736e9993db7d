"""The FastAPI app: routes, API-key check, body limit, metrics and one JSON log line per request.

    from hexamer.server import create_app
    app = create_app("path/to/Carbon-3B", max_num_seqs=64, api_key="...")   # then run with uvicorn

The model folder is read as data (JSON + safetensors); no code from it is ever executed.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hexamer.carbon import Carbon
from hexamer.engine import Engine, EngineConfig
from hexamer.engine.kv_manager import kv_bytes_per_token
from hexamer.finetune.apply import Predictor, check_head_folder
from hexamer.finetune.shared import load_served_head
from hexamer.model.memory import NotEnoughMemory, available_memory_bytes, format_bytes
from hexamer.server.completions import create_completion
from hexamer.server.detok import TokenStrings
from hexamer.server.dna import dna_score, dna_vep, embeddings, model_facts
from hexamer.server.dna_design import dna_design
from hexamer.server.dna_generate import dna_generate
from hexamer.server.dna_predict import dna_predict
from hexamer.server.errors import ApiError, error_response, parse_request
from hexamer.server.health import self_check
from hexamer.server.metrics import ServerMetrics
from hexamer.server.schemas import (
    CompletionRequest,
    DnaDesignRequest,
    DnaGenerateRequest,
    DnaPredictRequest,
    DnaScoreRequest,
    DnaVepRequest,
    EmbeddingRequest,
)
from hexamer.server.settings import CPU_KV_CACHE_BYTES, ServerSettings
from hexamer.server.state import ARRIVED_AT, ServerState
from hexamer.server.view_access import (
    LOGIN_PATH,
    is_view_path,
    login,
    login_page,
    session_cookie_ok,
)
from hexamer.server.worker import EngineWorker
from hexamer.tokenizer.folder import read_json
from hexamer.view.serving import ViewSite, view_app

access_log = logging.getLogger("hexamer.server.access")
log = logging.getLogger("hexamer.server")

ROUTES = (
    "/health",
    "/metrics",
    "/v1/models",
    "/v1/completions",
    "/v1/embeddings",
    "/v1/dna/generate",
    "/v1/dna/score",
    "/v1/dna/vep",
    "/v1/dna/predict",
    "/v1/dna/design",
)
OPEN_PATHS = frozenset({"/health"})
#: what still answers while the server drains on shutdown (everything else gets 503)
DRAIN_PATHS = frozenset({"/health", "/metrics", "/v1/models"})
#: bodies above this are parsed on the preparation threads, not on the event loop
OFFLOAD_BODY_BYTES = 64 * 1024
#: share of the free memory the KV cache may take when no --kv-cache-bytes is given
KV_MEMORY_FRACTION = 0.8


def _eos_ids(carbon: Carbon, folder: Path | None) -> tuple[int, ...]:
    """EOS ids: the tokenizer's plus ``generation_config.json``'s (read as JSON, like vLLM does)."""
    ids = {carbon.tokenizer.eos_token_id} if carbon.tokenizer.eos_token_id is not None else set()
    if folder is not None:
        for name in ("generation_config.json", "config.json"):
            value = (read_json(folder / name) or {}).get("eos_token_id")
            if isinstance(value, int):
                ids.add(value)
            elif isinstance(value, list):
                ids.update(v for v in value if isinstance(v, int))
    return tuple(sorted(ids))


def kv_budget(carbon: Carbon, settings: ServerSettings, max_len: int) -> int | None:
    """The KV-cache budget: ``kv_cache_bytes`` (the server's, else the model's engine config), else a
    share of the free memory, so the cache is sized by ``max_model_len`` and the machine, never
    allocated blindly from the model's context. Refuses (with the estimate) a ``max_len`` of which
    not even one sequence fits."""
    given = (
        settings.kv_cache_bytes
        if settings.kv_cache_bytes is not None
        else carbon.engine_config.kv_cache_bytes
    )
    if given is not None:
        return given
    free = available_memory_bytes(carbon.model.device)
    if free is None:
        return None
    budget = int(free * KV_MEMORY_FRACTION)
    per_row = kv_bytes_per_token(carbon.model) * max_len
    if carbon.model.device.type == "cpu":  # a modest pool: pages are touched as tokens arrive
        budget = min(budget, max(CPU_KV_CACHE_BYTES, per_row))
    if per_row > budget:
        given_len = settings.max_model_len or carbon.engine_config.max_model_len
        source = "the model's max_position_embeddings" if given_len is None else "max_model_len"
        raise NotEnoughMemory(
            f"one sequence of {max_len:,} tokens ({source}) needs {format_bytes(per_row)} of KV cache, more "
            f"than {KV_MEMORY_FRACTION:.0%} of the {format_bytes(free)} free on {carbon.model.device}; "
            "pass a smaller --max-model-len"
        )
    return budget


def server_engine_config(carbon: Carbon, settings: ServerSettings) -> EngineConfig:
    """The server engine's options: the loaded model's engine config (``compile_decode``,
    ``static_decode``, prefill sizes, ...) with the rows, sequence length and KV-cache budget the
    server settings give (a setting left unset keeps the model's config, then the defaults)."""
    context = carbon.context_length
    max_len = min(settings.max_model_len or carbon.engine_config.max_model_len or context, context)
    return carbon.engine_config.replace(
        max_batch_size=settings.max_num_seqs,
        max_model_len=max_len,
        kv_cache_bytes=kv_budget(carbon, settings, max_len),
    )


def attach_draft(engine: Engine, carbon: Carbon, draft: str | os.PathLike[str] | Carbon) -> None:
    """Give the serving engine a draft model for speculative requests: loaded like the target (same
    device and dtype), checked to share its tokenizer, its KV cache allocated now (rows and length
    mirror the target's) so a request never meets an allocation failure."""
    from hexamer.engine.speculative import check_compatible

    if not isinstance(draft, Carbon):
        draft = Carbon.from_pretrained(draft, dtype=carbon.model.dtype, device=carbon.model.device)
    check_compatible(carbon, draft)
    engine.attach_draft(draft.model)
    engine.reserve()  # the draft's cache, like the target's


def load_head(head: str | os.PathLike[str] | Predictor, carbon: Carbon) -> tuple[Predictor, str]:
    """The fine-tuned head served beside ``carbon`` (loaded on its device, in its dtype) and its name."""
    if isinstance(head, Predictor):
        return head, str(head.model.tokenizer.name_or_path or "head")
    check_head_folder(head)
    # on the served model's own decoder when the folder's backbone is the same tensors (a probe's)
    lm_folder = carbon.tokenizer.name_or_path or None
    predictor, shared = load_served_head(head, carbon.model, lm_folder, device=str(carbon.backend.device))
    log.info(json.dumps({"event": "head_loaded", "head": os.fspath(head), "backbone_shared": shared}))
    return predictor, os.path.basename(os.path.normpath(os.fspath(head)))


def build_state(
    model: str | os.PathLike[str] | Carbon,
    settings: ServerSettings,
    draft: str | os.PathLike[str] | Carbon | None = None,
    head: str | os.PathLike[str] | Predictor | None = None,
) -> ServerState:
    if isinstance(model, Carbon):
        carbon, folder = model, None
        name = getattr(carbon.tokenizer, "name_or_path", None) or "hexamer"
    else:
        carbon = Carbon.from_pretrained(model, engine=EngineConfig(max_batch_size=settings.max_num_seqs))
        folder = Path(str(carbon.tokenizer.name_or_path or model))
        name = str(model)
    if folder is None and carbon.tokenizer.name_or_path:
        folder = Path(str(carbon.tokenizer.name_or_path))
    metrics = ServerMetrics()
    # an engine of its own: the caller's ``carbon.engine`` stays free for offline use
    engine_config = server_engine_config(carbon, settings)
    engine = Engine(carbon.model, carbon.layout, engine_config)
    worker = EngineWorker(engine, max_queue=settings.max_queue, metrics=metrics)
    if draft is not None:
        attach_draft(engine, carbon, draft)
    metrics.kv_rows.set(worker.rows)
    metrics.kv_bytes.set(engine.kv_bytes)
    metrics.kv_blocks.set(engine.kv_blocks_total)
    metrics.kv_blocks_free.set(engine.kv_blocks_free)
    problem = self_check(engine, carbon.tokenizer)
    if problem is not None:
        log.error(json.dumps({"event": "model_self_check_failed", "reason": problem}))
    predictor, head_name = load_head(head, carbon) if head is not None else (None, None)
    return ServerState(
        carbon=carbon,
        settings=settings,
        worker=worker,
        metrics=metrics,
        strings=TokenStrings(carbon.tokenizer),
        model_name=settings.served_model_name or str(name),
        model_root=str(folder) if folder is not None else str(name),
        eos_ids=_eos_ids(carbon, folder if folder is not None and folder.is_dir() else None),
        model_problem=problem,
        head=predictor,
        head_name=head_name,
    )


class GuardMiddleware:
    """Pure ASGI (never buffers a stream): request id, API key, Content-Length limit, metrics and
    one JSON access-log line per request, written when its last byte has been sent."""

    def __init__(self, app: ASGIApp, state: ServerState) -> None:
        self.app = app
        self.state = state
        key = state.settings.api_key
        self.key = key.encode() if key else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        scope.setdefault("state", {})[ARRIVED_AT] = time.monotonic()  # --timeout counts from here
        path = scope.get("path", "")
        endpoint = path if path in ROUTES else "other"
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        request_id = headers.get("x-request-id") or secrets.token_hex(8)
        scope.setdefault("state", {})
        status = {"code": 500}

        async def send_wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (b"x-request-id", request_id.encode())]
            await send(message)

        try:
            denied = self._deny(path, headers, scope)
            if denied is not None:
                denied.headers["Connection"] = "close"  # its body was never read
                await denied(scope, receive, send_wrapped)
            else:
                await self.app(scope, self._timed(receive), send_wrapped)
        finally:
            latency = time.perf_counter() - start
            m = self.state.metrics
            m.requests.labels(endpoint, str(status["code"])).inc()
            m.latency.labels(endpoint).observe(latency)
            usage = scope["state"].get("usage") or {}
            if endpoint != "/metrics" and endpoint != "/health":
                access_log.info(
                    json.dumps(
                        {
                            "request_id": request_id,
                            "method": scope.get("method"),
                            "endpoint": path,
                            "status": status["code"],
                            "latency_s": round(latency, 6),
                            **{k: v for k, v in usage.items() if isinstance(v, int)},
                        }
                    )
                )

    def _timed(self, receive: Receive) -> Receive:
        """``receive`` that raises 408 when the body has not fully arrived ``body_timeout_s`` after
        the headers (a lying Content-Length, a slow drip); later calls (disconnect) pass through."""
        limit = self.state.settings.body_timeout_s
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        done = False

        async def receive_body() -> Message:
            nonlocal done
            if done:
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), max(deadline - loop.time(), 0.0))
            except TimeoutError:
                done = True
                raise ApiError(408, f"the request body did not arrive within {limit:g} s") from None
            if message["type"] != "http.request" or not message.get("more_body", False):
                done = True
            return message

        return receive_body

    def _deny(self, path: str, headers: dict[str, str], scope: Scope) -> Response | None:
        if not self.state.worker.accepting and path not in DRAIN_PATHS:
            return error_response(503, "the server is shutting down; retry on another replica")
        if self.key is not None and path not in OPEN_PATHS:
            auth = headers.get("authorization", "")
            scheme, _, token = auth.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), self.key):
                if not is_view_path(path):
                    return _no_key()
                refused = self._view_refusal(path, headers, scope)
                if refused is not None:
                    return refused
        length = headers.get("content-length")
        if length is not None:
            try:
                size = int(length)
            except ValueError:
                return error_response(400, "Content-Length is not a number")
            if size > self.state.settings.max_body_bytes:
                return error_response(
                    413,
                    f"request body of {size} bytes exceeds the limit of {self.state.settings.max_body_bytes}",
                )
        return None

    def _view_refusal(self, path: str, headers: dict[str, str], scope: Scope) -> Response | None:
        """``/view/`` without the bearer header (a browser): its session cookie opens it; the login
        form's post goes on to the login route; anything else is 401 (the login form for the page
        itself)."""
        assert self.key is not None
        if session_cookie_ok(self.key, headers.get("cookie", "")):
            return None
        if path == LOGIN_PATH and scope.get("method") == "POST":
            return None  # the route checks the key
        return login_page(path) if path in ("/view", "/view/") else _no_key()


def _no_key() -> Response:
    return error_response(401, "invalid or missing API key (send 'Authorization: Bearer <key>')")


Handler = Callable[[ServerState, HttpRequest, Any], Awaitable[Response]]


def create_app(
    model: str | os.PathLike[str] | Carbon,
    settings: ServerSettings | None = None,
    *,
    draft: str | os.PathLike[str] | Carbon | None = None,
    head: str | os.PathLike[str] | Predictor | None = None,
    view: ViewSite | None = None,
    **options: Any,
) -> FastAPI:
    """The server app for a model folder (or a loaded :class:`Carbon`); ``options`` are
    :class:`ServerSettings` fields; ``draft`` (a smaller model with the same tokenizer) serves
    ``/v1/dna/generate`` speculatively; ``head`` (a fine-tuned head folder, or a loaded
    :class:`~hexamer.finetune.apply.Predictor`) is served beside the model at ``/v1/dna/predict``;
    ``view`` (:func:`hexamer.view.build_site`) is the igv.js page of result files at ``/view/``,
    behind the same API key (a browser logs in once for a session cookie: ``view_access``). The engine thread starts with the app and stops with it."""
    if settings is None:
        settings = ServerSettings.from_options(**options)
    elif options:
        raise TypeError("give either settings or keyword options, not both")
    state = build_state(model, settings, draft, head)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state.worker.start()
        log.info(json.dumps(_ready_event(state)))
        yield
        await asyncio.to_thread(state.worker.stop, settings.shutdown_grace_s)
        state.prep_pool.shutdown(wait=False, cancel_futures=True)
        log.info(json.dumps({"event": "stopped"}))

    app = FastAPI(title="hexamer", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.hexamer = state
    app.add_middleware(GuardMiddleware, state=state)

    @app.exception_handler(ApiError)
    async def _api_error(_: HttpRequest, exc: ApiError) -> JSONResponse:
        return error_response(exc.status, exc.message, exc.param)

    @app.exception_handler(Exception)
    async def _unexpected(_: HttpRequest, exc: Exception) -> JSONResponse:  # a bug, never a crash
        log.exception("unhandled error")
        return error_response(500, f"internal error: {type(exc).__name__}: {exc}")

    def post(path: str, schema: type[BaseModel], handler: Handler) -> None:
        async def endpoint(request: HttpRequest) -> Response:
            body = await parse_request(
                request,
                schema,
                settings.max_body_bytes,
                offload=state.offload,
                offload_above=OFFLOAD_BODY_BYTES,
            )
            return await handler(state, request, body)

        app.add_api_route(path, endpoint, methods=["POST"], include_in_schema=False)

    post("/v1/completions", CompletionRequest, create_completion)
    post("/v1/embeddings", EmbeddingRequest, embeddings)
    post("/v1/dna/generate", DnaGenerateRequest, dna_generate)
    post("/v1/dna/score", DnaScoreRequest, dna_score)
    post("/v1/dna/vep", DnaVepRequest, dna_vep)
    post("/v1/dna/predict", DnaPredictRequest, dna_predict)
    post("/v1/dna/design", DnaDesignRequest, dna_design)

    @app.get("/health", include_in_schema=False)
    async def health() -> Response:
        w = state.worker
        status = "shutting_down" if not w.accepting else "model_error" if state.model_problem else "ok"
        return JSONResponse(
            {
                "status": status,
                "model": state.model_name,
                "running": w.running,
                "waiting": w.waiting,
                "kv_rows_used": w.rows_used,
                "kv_rows": w.rows,
                **({"reason": state.model_problem} if state.model_problem else {}),
            },
            status_code=200 if status == "ok" else 503,
        )

    @app.get("/metrics", include_in_schema=False)
    async def metrics() -> Response:
        return Response(state.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.get("/v1/models", include_in_schema=False)
    async def models() -> Response:
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {
                        "id": state.model_name,
                        "object": "model",
                        "created": int(time.time()),
                        "owned_by": "hexamer",
                        "root": state.model_root,
                        "parent": None,
                        "max_model_len": state.max_len,
                        "permission": [],
                        "hexamer": model_facts(state),
                    }
                ],
            }
        )

    if view is not None:
        _mount_view(app, view, settings.api_key)
    return app


def _ready_event(state: ServerState) -> dict[str, Any]:
    """The ``ready`` log line: the model, its KV rows and blocks, the engine's settings."""
    engine = state.worker.engine
    return {
        "event": "ready",
        "model": state.model_name,
        "kv_rows": state.worker.rows,
        "kv_blocks": engine.kv_blocks_total,
        "kv_blocks_free": engine.kv_blocks_free,
        "kv_block_size": engine.kv_block_size,
        "max_model_len": state.max_len,
        "engine": state.engine_config.as_dict(),
    }


def _mount_view(app: FastAPI, view: ViewSite, api_key: str | None) -> None:
    """The igv.js page at ``/view/`` and, with an API key, the login its browser posts to."""
    if api_key:
        key = api_key.encode()

        async def view_login(request: HttpRequest) -> Response:
            return await login(request, key)

        app.add_api_route(LOGIN_PATH, view_login, methods=["POST"], include_in_schema=False)
    app.mount("/view", view_app(view))
