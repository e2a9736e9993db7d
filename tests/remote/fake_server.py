"""A small stand-in for vLLM and SGLang: their request/response formats, computed with full-vocabulary
log-softmax from a local model, on a real uvicorn server on a loopback port.

The formats follow the servers' sources (vLLM ``protocol.py`` / ``serving_completion.py``: prompt
log-probabilities keyed by token id, the prompt's own token always included, ``"token_id:N"`` keys
with ``return_tokens_as_token_ids``; SGLang ``tokenizer_manager.py``: ``[logprob, token_id, text]``
triples, ``None`` first). Knobs simulate failures: an API key, 429s, malformed bodies, a server that
leaves the prompt's own token out of its top N.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from hexamer import Carbon


@dataclass
class FakeSettings:
    owned_by: str = "vllm"
    model_name: str = "tiny-carbon"
    api_key: str | None = None
    max_logprobs: int = 10**6
    fail_first: int = 0  # answer ``fail_status`` to the first n POSTs
    fail_status: int = 429
    malformed: str | None = None  # "not_json", "no_choices", "short_prompt_logprobs", "bad_entry"
    drop_true_token: bool = False  # leave the prompt's own token out of its top N
    max_model_len: int | None = None
    token_delay_s: float = 0.0  # streaming: pause between tokens
    stream_error: str | None = None  # streaming: send this error event after the first token
    calls: list[str] = field(default_factory=list)


class FakeServer:
    def __init__(self, carbon: Carbon, settings: FakeSettings) -> None:
        self.carbon = carbon
        self.s = settings
        self.vocab = carbon.model.config.vocab_size
        self.lock = threading.Lock()

    @torch.inference_mode()
    def logprobs(self, ids: list[int]) -> torch.Tensor:
        """(T, V) full-vocabulary log-softmax after each prompt position (float64)."""
        with self.lock:
            out = self.carbon.model(torch.tensor([ids]), logits_at="all").logits[0]
        return torch.log_softmax(out.double(), dim=-1)

    def top(self, row: torch.Tensor, n: int, own: int | None) -> list[tuple[int, float, int]]:
        """(token id, logprob, rank) of the top n, plus ``own`` when outside them."""
        n = min(n, row.numel())
        values, idx = torch.topk(row, n)
        out = list(zip(idx.tolist(), values.tolist(), range(1, n + 1), strict=True))
        if own is not None and own not in {t for t, _, _ in out}:
            rank = int((row > row[own]).sum()) + 1
            out.append((own, float(row[own]), rank))
        if self.s.drop_true_token and own is not None:
            out = [e for e in out if e[0] != own]
        return out

    def sample(self, row: torch.Tensor, body: dict[str, Any], gen: torch.Generator) -> int:
        allowed = body.get("allowed_token_ids")
        x = row.clone()
        if allowed:
            keep = torch.zeros_like(x, dtype=torch.bool)
            keep[torch.tensor(allowed)] = True
            x = x.masked_fill(~keep, -torch.inf)
        temperature = float(body.get("temperature", 1.0))
        if temperature == 0:
            return int(x.argmax())
        probs = torch.softmax(x / temperature, dim=-1)
        return int(torch.multinomial(probs, 1, generator=gen))

    def generate(self, ids: list[int], body: dict[str, Any], n: int) -> list[tuple[int, torch.Tensor]]:
        gen = torch.Generator().manual_seed(int(body.get("seed") or 0))
        out: list[tuple[int, torch.Tensor]] = []
        seq = list(ids)
        stop = set(body.get("stop_token_ids") or [])
        for _ in range(n):
            row = self.logprobs(seq)[-1]
            tid = self.sample(row, body, gen)
            out.append((tid, row))
            seq.append(tid)
            if tid in stop:
                break
        return out


def fast_json(body: Any) -> Response:
    """Serialise with ``json.dumps`` (FastAPI's encoder takes seconds on 10^5 log-probabilities)."""
    return Response(json.dumps(body), media_type="application/json")


def _prompt_ids(carbon: Carbon, prompt: Any) -> list[int]:
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], int):
        return prompt
    if isinstance(prompt, str):
        return carbon.tokenizer.encode(prompt)
    raise ValueError(f"unsupported prompt {str(prompt)[:50]}")


def make_app(carbon: Carbon, settings: FakeSettings) -> FastAPI:
    fake = FakeServer(carbon, settings)
    app = FastAPI()
    s = settings

    def guard(request: Request) -> JSONResponse | None:
        s.calls.append(request.url.path)
        if s.api_key and request.headers.get("authorization") != f"Bearer {s.api_key}":
            return JSONResponse({"error": "Unauthorized"}, status_code=401)
        if request.method == "POST" and s.fail_first > 0:
            s.fail_first -= 1
            return JSONResponse(
                {"object": "error", "message": "server busy", "type": "busy", "code": s.fail_status},
                status_code=s.fail_status,
                headers={"Retry-After": "0"},
            )
        return None

    def too_many(n: int | None, what: str) -> JSONResponse | None:
        if n is not None and n > s.max_logprobs:
            return JSONResponse(
                {
                    "object": "error",
                    "message": f"Requested {what} of {n}, which is greater than max allowed: {s.max_logprobs}",
                    "type": "BadRequestError",
                    "code": 400,
                },
                status_code=400,
            )
        return None

    @app.get("/v1/models")
    async def models(request: Request) -> Any:
        if (bad := guard(request)) is not None:
            return bad
        entry = {"id": s.model_name, "object": "model", "owned_by": s.owned_by, "root": "/nonexistent/model"}
        if s.max_model_len:
            entry["max_model_len"] = s.max_model_len
        return {"object": "list", "data": [entry]}

    @app.get("/get_model_info")
    async def model_info(request: Request) -> Any:
        if s.owned_by != "sglang":
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        return {"model_path": "/nonexistent/model", "is_generation": True}

    @app.post("/v1/completions")
    async def completions(request: Request) -> Any:
        if (bad := guard(request)) is not None:
            return bad
        body = await request.json()
        if s.malformed == "not_json":
            return StreamingResponse(iter([b"<html>oops</html>"]), media_type="text/html")
        if s.malformed == "no_choices":
            return {"id": "x", "object": "text_completion"}
        for key, what in (("prompt_logprobs", "prompt logprobs"), ("logprobs", "sample logprobs")):
            if (bad := too_many(body.get(key), what)) is not None:
                return bad
        ids = _prompt_ids(carbon, body["prompt"])
        n_new = int(body.get("max_tokens", 16))
        if s.max_model_len and len(ids) + n_new > s.max_model_len:  # vLLM's check
            return JSONResponse(
                {
                    "object": "error",
                    "message": f"This model's maximum context length is {s.max_model_len} tokens. However, "
                    f"you requested {len(ids) + n_new} tokens ({len(ids)} in the messages, {n_new} in the "
                    "completion). Please reduce the length of the messages or completion.",
                    "type": "BadRequestError",
                    "code": 400,
                },
                status_code=400,
            )
        if body.get("stream"):
            return StreamingResponse(stream(ids, body, n_new), media_type="text/event-stream")
        choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
        n_prompt = body.get("prompt_logprobs")
        if n_prompt is not None:
            lp = await asyncio.to_thread(fake.logprobs, ids)
            entries: list[Any] = [None]
            for p in range(1, len(ids)):
                top = fake.top(lp[p - 1], int(n_prompt), ids[p])
                entries.append({str(t): {"logprob": v, "rank": r, "decoded_token": "x"} for t, v, r in top})
            if s.malformed == "short_prompt_logprobs":
                entries = entries[:-1]
            if s.malformed == "bad_entry":
                entries[-1] = {"abc": {"logprob": "high"}}
            choice["prompt_logprobs"] = entries
        made = await asyncio.to_thread(fake.generate, ids, body, n_new)
        as_ids = bool(body.get("return_tokens_as_token_ids"))
        n_top = body.get("logprobs")
        if n_top is not None:

            def key(t: int) -> str:
                return f"token_id:{t}" if as_ids else carbon.tokenizer.id_to_token(t)

            choice["logprobs"] = {
                "tokens": [key(t) for t, _ in made],
                "token_logprobs": [float(row[t]) for t, row in made],
                "top_logprobs": [
                    {key(t): v for t, v, _ in fake.top(row, int(n_top), tid)} for tid, row in made
                ],
                "text_offset": list(range(len(made))),
            }
        choice["text"] = "".join(carbon.tokenizer.id_to_token(t) for t, _ in made)
        usage = {
            "prompt_tokens": len(ids),
            "completion_tokens": len(made),
            "total_tokens": len(ids) + len(made),
        }
        return fast_json(
            {
                "id": "cmpl-1",
                "object": "text_completion",
                "model": s.model_name,
                "choices": [choice],
                "usage": usage,
            }
        )

    async def stream(ids: list[int], body: dict[str, Any], n: int):
        seq = list(ids)
        gen = torch.Generator().manual_seed(int(body.get("seed") or 0))
        for i in range(n):
            row = (await asyncio.to_thread(fake.logprobs, seq))[-1]
            tid = fake.sample(row, body, gen)
            seq.append(tid)
            if s.token_delay_s:
                await asyncio.sleep(s.token_delay_s)
            chunk = {
                "id": "cmpl-1",
                "object": "text_completion",
                "choices": [
                    {
                        "index": 0,
                        "text": carbon.tokenizer.id_to_token(tid),
                        "finish_reason": "length" if i == n - 1 else None,
                    }
                ],
            }
            yield f"data: {json.dumps(chunk)}\n\n"
            if s.stream_error:
                yield f"data: {json.dumps({'error': {'message': s.stream_error, 'code': 503}})}\n\n"
                yield "data: [DONE]\n\n"
                return
        if (body.get("stream_options") or {}).get("include_usage"):
            usage = {"prompt_tokens": len(ids), "completion_tokens": n, "total_tokens": len(ids) + n}
            yield f"data: {json.dumps({'id': 'cmpl-1', 'choices': [], 'usage': usage})}\n\n"
        yield "data: [DONE]\n\n"

    @app.post("/generate")
    async def sglang_generate(request: Request) -> Any:
        if (bad := guard(request)) is not None:
            return bad
        if s.owned_by != "sglang":
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        body = await request.json()
        ids = body["input_ids"]
        n_top = int(body.get("top_logprobs_num") or 0)
        if (bad := too_many(n_top, "top_logprobs_num")) is not None:
            return bad
        start = body.get("logprob_start_len", -1)
        lp = await asyncio.to_thread(fake.logprobs, ids)
        params = body.get("sampling_params") or {}
        made = await asyncio.to_thread(
            fake.generate,
            ids,
            {"temperature": params.get("temperature", 1.0)},
            int(params.get("max_new_tokens", 16)),
        )
        meta: dict[str, Any] = {"prompt_tokens": len(ids), "completion_tokens": len(made)}
        if body.get("return_logprob"):
            if start is not None and start >= 0:
                own = [[None, ids[0], None]] + [
                    [float(lp[p - 1, ids[p]]), ids[p], None] for p in range(1, len(ids))
                ]
                tops: list[Any] = [None]
                for p in range(1, len(ids)):
                    # SGLang's top list does not carry the prompt token unless it ranks in the top N
                    tops.append([[v, t, None] for t, v, r in fake.top(lp[p - 1], n_top, None)])
                meta["input_token_logprobs"] = own[start:]
                meta["input_top_logprobs"] = tops[start:]
            meta["output_token_logprobs"] = [[float(row[t]), t, None] for t, row in made]
            meta["output_top_logprobs"] = [
                [[v, t, None] for t, v, _ in fake.top(row, n_top, None)] for _, row in made
            ]
        return fast_json({"text": "", "output_ids": [t for t, _ in made], "meta_info": meta})

    return app


@contextmanager
def serve(app: FastAPI) -> Iterator[str]:
    """Run ``app`` on a free loopback port in a thread; yields its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="error", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("fake server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def free_port_url() -> str:
    """A loopback URL where nothing listens."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}"
