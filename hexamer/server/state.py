"""What every endpoint needs: the model, tokenizer, engine thread, limits and metrics."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from hexamer.carbon import Carbon
from hexamer.engine import Engine, EngineConfig
from hexamer.finetune.apply import Predictor
from hexamer.server.detok import TokenStrings
from hexamer.server.errors import ApiError
from hexamer.server.metrics import ServerMetrics
from hexamer.server.settings import ServerSettings
from hexamer.server.worker import EngineWorker, QueueFull, ShuttingDown, Submission
from hexamer.tokenizer import CarbonTokenizer

T = TypeVar("T")

#: where :class:`~hexamer.server.app.GuardMiddleware` stamps a request's arrival in ``scope["state"]``
ARRIVED_AT = "arrived_at"


@dataclass
class ServerState:
    carbon: Carbon
    settings: ServerSettings
    worker: EngineWorker
    metrics: ServerMetrics
    strings: TokenStrings
    model_name: str
    model_root: str
    eos_ids: tuple[int, ...]
    #: why the model cannot serve (its start-up self-check gave NaN/inf: :mod:`hexamer.server.health`)
    model_problem: str | None = None
    #: a fine-tuned head served beside the language model (``hexamer serve --head``): /v1/dna/predict
    head: Predictor | None = None
    head_name: str | None = None
    #: parses, validates and tokenises request bodies, so the event loop (and ``/health``) never waits on them
    prep_pool: ThreadPoolExecutor = field(init=False)

    def __post_init__(self) -> None:
        self.prep_pool = ThreadPoolExecutor(self.settings.prep_threads, thread_name_prefix="hexamer-prep")

    async def offload(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` (request preparation: CPU work bounded by the request limits) on the
        preparation threads and await its result."""
        return await asyncio.get_running_loop().run_in_executor(self.prep_pool, fn)

    def deadline(self, scope: Mapping[str, Any]) -> float:
        """``time.monotonic()`` at which the request of ``scope`` times out: ``request_timeout_s``
        after it arrived, so reading its body, preparing it and waiting in the queue all count, as
        on the client's own clock."""
        arrived = (scope.get("state") or {}).get(ARRIVED_AT)
        start = arrived if isinstance(arrived, float) else time.monotonic()
        return start + self.settings.request_timeout_s

    def check_deadline(self, deadline: float) -> None:
        """504 when ``deadline`` has passed (before work is queued for a request already late)."""
        if time.monotonic() >= deadline:
            raise ApiError(504, self.timeout_message)

    def submit(self, subs: list[Submission], deadline: float) -> None:
        """Queue a request's submissions on the engine: 504 when it is late already (body upload,
        preparation: never queued), 429 when the queue is full, 503 while shutting down."""
        self.check_deadline(deadline)
        try:
            self.worker.submit(subs)
        except QueueFull as exc:
            raise ApiError(429, str(exc)) from None
        except ShuttingDown as exc:
            raise ApiError(503, str(exc)) from None

    @property
    def timeout_message(self) -> str:
        return f"request timed out after {self.settings.request_timeout_s:g} s"

    @property
    def max_prompt_chars(self) -> int:
        return self.settings.prompt_chars(self.max_len)

    @property
    def tokenizer(self) -> CarbonTokenizer:
        return self.carbon.tokenizer

    @property
    def max_len(self) -> int:
        """Tokens one sequence may hold (prompt + output): the KV cache's row length."""
        return self.worker.max_len

    @property
    def engine(self) -> Engine:
        """The serving engine; endpoints use its door only (``check``, ``make_request``, ``has_draft``)."""
        return self.worker.engine

    @property
    def engine_config(self) -> EngineConfig:
        """The serving engine's options (rows, sequence length, KV budget, decode path)."""
        return self.worker.engine.config

    @property
    def vocab_size(self) -> int:
        return len(self.carbon.tokenizer)

    def check_model(self, model: str | None) -> None:
        if model is not None and model not in (self.model_name, self.model_root):
            raise ApiError(
                404, f"The model `{model}` does not exist (this server serves `{self.model_name}`).", "model"
            )
