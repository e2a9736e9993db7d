"""Response helpers: JSON with pre-serialised fragments, SSE lines, and a streaming response that
notices a client disconnect at once (so its requests are cancelled and their KV rows freed)."""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import AsyncIterable, Callable
from typing import Any

import anyio
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send


class RawJSON(str):
    """A string that is already JSON and goes into :func:`dumps` output verbatim."""


def _clean(obj: Any, raws: list[str]) -> Any:
    if isinstance(obj, RawJSON):
        raws.append(str(obj))
        return f"\x00raw{len(raws) - 1}\x00"
    if isinstance(obj, dict):
        return {k: _clean(v, raws) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v, raws) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None  # NaN (an unscored base) is null in JSON
    return obj


def dumps(obj: Any) -> str:
    """Compact JSON; NaN/inf become null; :class:`RawJSON` values are spliced in as they are."""
    raws: list[str] = []
    text = json.dumps(_clean(obj, raws), separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    for i, raw in enumerate(raws):
        text = text.replace(f'"\\u0000raw{i}\\u0000"', raw, 1)
    return text


def json_response(text: str, status: int = 200) -> Response:
    return Response(text.encode("utf-8"), status_code=status, media_type="application/json")


def sse(obj: Any) -> str:
    return f"data: {dumps(obj)}\n\n"


class DisconnectAwareStream(StreamingResponse):
    """Server-sent events that stop as soon as the client goes away.

    The body is streamed while another task waits for ``http.disconnect``; whichever ends first
    cancels the other, and ``on_close`` runs in every case (it cancels the engine requests that
    are still running, even if the stream never started).
    """

    def __init__(self, content: AsyncIterable[str], on_close: Callable[[], None]) -> None:
        super().__init__(
            content,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
        self.on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            async with anyio.create_task_group() as tg:

                async def stream() -> None:
                    with contextlib.suppress(OSError):
                        await self.stream_response(send)
                    tg.cancel_scope.cancel()

                tg.start_soon(stream)
                await self.listen_for_disconnect(receive)
                tg.cancel_scope.cancel()
        finally:
            self.on_close()
            aclose = getattr(self.body_iterator, "aclose", None)
            if aclose is not None:
                with anyio.CancelScope(shield=True):
                    await aclose()


async def wait_disconnect(http: Any) -> None:
    """Return when the client of ``http`` (a starlette request) disconnects."""
    while True:
        message = await http.receive()
        if message["type"] == "http.disconnect":
            return
