"""Response helpers: JSON with pre-serialised or lazily written fragments, SSE lines, a JSON body
streamed from a worker thread, and a streaming response that notices a client disconnect at once
(so its requests are cancelled and their KV rows freed)."""

from __future__ import annotations

import contextlib
import json
import math
import secrets
from collections.abc import AsyncIterable, Callable, Iterable, Iterator
from typing import Any

import anyio
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from hexamer.model.train_heap import glibc


class RawJSON(str):
    """A string that is already JSON and goes into :func:`dumps` output verbatim."""


class JsonPieces:
    """A JSON value written lazily, piece by piece, by ``write()`` (an iterable of str whose
    concatenation is the value): large parts of a response (top-4096 log-probabilities, per-base
    scores) are never held whole, only a piece at a time, and only on the thread that streams them
    (:func:`json_stream`)."""

    def __init__(self, write: Callable[[], Iterable[str]]) -> None:
        self.write = write


def _clean(obj: Any, raws: list[RawJSON | JsonPieces], tag: str) -> Any:
    if isinstance(obj, RawJSON | JsonPieces):
        raws.append(obj)
        return f"\x00{tag}{len(raws) - 1}\x00"
    if isinstance(obj, dict):
        return {k: _clean(v, raws, tag) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v, raws, tag) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None  # NaN (an unscored base) is null in JSON
    return obj


def json_number(x: float) -> str:
    """A float as JSON text: ``repr`` (what ``json.dumps`` writes), ``null`` for NaN and ±inf,
    which RFC 8259 has no literal for (Python's ``NaN``/``Infinity`` break strict clients)."""
    return repr(x) if math.isfinite(x) else "null"


def iter_json(obj: Any) -> Iterator[str]:
    """Compact JSON of ``obj`` in pieces: NaN/inf become null, :class:`RawJSON` values are spliced
    in as they are, :class:`JsonPieces` are written when their turn comes."""
    raws: list[RawJSON | JsonPieces] = []
    tag = f"raw{secrets.token_hex(6)}-"  # never equal to text a client or the model wrote
    text = json.dumps(_clean(obj, raws, tag), separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    pos = 0
    for i, raw in enumerate(raws):  # json.dumps keeps the order _clean visited them in
        marker = f'"\\u0000{tag}{i}\\u0000"'
        at = text.index(marker, pos)
        yield text[pos:at]
        if isinstance(raw, JsonPieces):
            yield from raw.write()
        else:
            yield str(raw)
        pos = at + len(marker)
    yield text[pos:]


def dumps(obj: Any) -> str:
    """Compact JSON; NaN/inf become null; :class:`RawJSON` and :class:`JsonPieces` are spliced in."""
    return "".join(iter_json(obj))


def json_response(text: str, status: int = 200) -> Response:
    return Response(text.encode("utf-8"), status_code=status, media_type="application/json")


#: bytes gathered before a piece of a streamed JSON body is sent
STREAM_CHUNK_BYTES = 256 * 1024
#: a streamed body at least this large hands the memory it freed back to the system when sent
TRIM_AFTER_BYTES = 8 * 2**20


def _chunks(obj: Any, trim: bool) -> Iterator[bytes]:
    """``obj``'s JSON as UTF-8 chunks of about :data:`STREAM_CHUNK_BYTES` (each piece is small, so
    no single step holds the GIL for long); trims the heap after a large body, or when ``trim``."""
    buffer: list[str] = []
    size = sent = 0
    for piece in iter_json(obj):
        buffer.append(piece)
        size += len(piece)
        if size >= STREAM_CHUNK_BYTES:
            data = "".join(buffer).encode("utf-8")
            buffer, size, sent = [], 0, sent + len(data)
            yield data
    if buffer:
        data = "".join(buffer).encode("utf-8")
        sent += len(data)
        yield data
    if trim or sent >= TRIM_AFTER_BYTES:
        trim_heap()


async def _in_thread(chunks: Iterator[bytes]) -> AsyncIterable[bytes]:
    """Each chunk made on a worker thread: the event loop only sends them."""
    end = object()
    while True:
        chunk = await anyio.to_thread.run_sync(next, chunks, end)
        if chunk is end:
            return
        yield chunk  # type: ignore[misc]


def json_stream(obj: Any, status: int = 200, *, trim: bool = False) -> Response:
    """A JSON response whose body is written on worker threads and sent chunk by chunk as the
    client reads it, never built whole: ``/health`` keeps answering while a 300 MB answer is
    written, and the memory it takes is one chunk, not the body (see :class:`JsonPieces`).
    ``trim``: give the freed heap back once it is sent even if the body was small (the work
    behind it was not: a scoring job's logits)."""
    return StreamingResponse(
        _in_thread(_chunks(obj, trim)), status_code=status, media_type="application/json"
    )


_LIBC = glibc()
#: glibc's mallopt parameter for the size from which an allocation gets its own mapping
_M_MMAP_THRESHOLD = -3
#: allocations of at least this many bytes are mapped alone and unmapped when freed (see
#: :func:`pin_mmap_threshold`)
MMAP_THRESHOLD_BYTES = 1 << 20


def trim_heap() -> None:
    """Give freed heap memory back to the system (glibc's ``malloc_trim``; a no-op elsewhere):
    glibc keeps what a large response freed in its arenas, so the server's RSS would stay at
    its peak; ctypes releases the GIL for the call."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def pin_mmap_threshold(nbytes: int = MMAP_THRESHOLD_BYTES) -> bool:
    """Map every allocation of ``nbytes`` or more on its own, for the life of the process.

    glibc raises its mmap threshold each time a mapped block is freed (up to 32 MiB), after which
    the score arrays and answer buffers of the next large request come from the thread arenas and
    stay resident when freed. A fixed threshold returns them to the system as they are freed: on
    the demo model, ``hexamer bench serve-limits`` peaks went from +229 to +102 MiB over idle for a
    score request, and from +251 to +190 MiB for three concurrent ``prompt_logprobs``; the price is
    a page fault per new mapping (that score request took 11.0 s instead of 7.3 s on the tiny demo
    model; the share shrinks as the model's own compute grows). Returns False where the C library
    is not glibc (nothing is changed)."""
    if _LIBC is None or nbytes < 1:
        return False
    return bool(_LIBC.mallopt(_M_MMAP_THRESHOLD, int(nbytes)))


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
