"""OpenAI-style error responses and strict request-body parsing.

Every client mistake becomes a 4xx with ``{"error": {"message", "type", "param", "code"}}`` (the
shape vLLM and OpenAI use) naming the field at fault; nothing a client sends yields a 500.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse

M = TypeVar("M", bound=BaseModel)

_TYPES = {
    400: "BadRequestError",
    401: "AuthenticationError",
    404: "NotFoundError",
    408: "RequestTimeoutError",
    413: "RequestTooLargeError",
    429: "RateLimitError",
    499: "ClientClosedRequest",
    500: "InternalServerError",
    503: "ServiceUnavailableError",
    504: "TimeoutError",
}


class ApiError(Exception):
    """An error to return to the client as JSON with this status."""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param

    def body(self) -> dict[str, Any]:
        return error_body(self.status, self.message, self.param)


def error_body(status: int, message: str, param: str | None = None) -> dict[str, Any]:
    return {
        "error": {"message": message, "type": _TYPES.get(status, "Error"), "param": param, "code": status}
    }


def error_response(status: int, message: str, param: str | None = None) -> JSONResponse:
    headers = {"Retry-After": "1"} if status in (429, 503) else {}
    if status == 408:  # the rest of that body may still be on its way: never reuse the connection
        headers["Connection"] = "close"
    return JSONResponse(error_body(status, message, param), status_code=status, headers=headers or None)


#: nginx's status for a client that closed the connection before the response (never sent: there
#: is no one to send it to; it is what the access log and ``hexamer_requests_total`` count)
CLIENT_CLOSED = 499
#: what reading a body raises when its client goes away mid-body (starlette, or anyio's streams)
_GONE = (
    ClientDisconnect,
    anyio.EndOfStream,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
    ConnectionError,
)


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refusing (413) more than ``limit`` bytes even without a Content-Length; a
    client that disconnects mid-body (a lying Content-Length, a slow body closed early) is a 499,
    not a server error."""
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise ApiError(413, f"request body exceeds the server limit of {limit} bytes")
            chunks.append(chunk)
    except _GONE:
        raise ApiError(
            CLIENT_CLOSED, "the client closed the connection before sending the whole body"
        ) from None
    return b"".join(chunks)


def _describe(exc: ValidationError) -> tuple[str, str | None]:
    errors = exc.errors(include_url=False)
    first = errors[0]
    if first["type"] == "json_invalid":
        return f"request body is not valid JSON: {first.get('ctx', {}).get('error', first['msg'])}", None
    if first["type"] == "model_type" and not first["loc"]:
        return "request body must be a JSON object", None
    messages: list[str] = []
    fields: list[str] = []
    for err in errors:
        loc = [str(p) for p in err["loc"]]
        name = loc[0] if loc else "body"
        if name in fields:
            continue  # a union reports one error per member: one line per field is clearer
        fields.append(name)
        if err["type"] == "extra_forbidden":
            messages.append(f"unknown field '{'.'.join(loc)}'")
        elif err["type"] == "missing":
            messages.append(f"missing required field '{'.'.join(loc)}'")
        else:
            where = ".".join([loc[0], *(p for p in loc[1:] if not _is_union_tag(p))])
            messages.append(f"invalid value for '{where}': {err['msg']} (got {_short(err.get('input'))})")
    return "; ".join(messages[:5]), fields[0] if fields else None


def _is_union_tag(part: str) -> bool:
    return (
        part.startswith(("list[", "str", "int", "float", "bool", "dict[", "function-")) and not part.isdigit()
    )


def _short(value: Any) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def parse_body(model: type[M], body: bytes) -> M:
    """Validate a JSON body strictly (unknown fields and wrong types are errors naming the field)."""
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        message, param = _describe(exc)
        raise ApiError(400, message, param) from None


async def parse_request(
    request: Request,
    model: type[M],
    limit: int,
    *,
    offload: Callable[[Callable[[], M]], Awaitable[M]] | None = None,
    offload_above: int = 0,
) -> M:
    """The body read (:func:`read_body`) and validated (:func:`parse_body`); one larger than
    ``offload_above`` bytes is parsed by ``offload`` (the preparation threads), so a large body never
    holds up the event loop (and ``/health``)."""
    raw = await read_body(request, limit)
    if offload is not None and len(raw) > offload_above:
        return await offload(lambda: parse_body(model, raw))
    return parse_body(model, raw)
