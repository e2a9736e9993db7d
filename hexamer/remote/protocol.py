"""Request bodies and response parsers for the servers hexamer can drive, and backend detection.

Log-probabilities come back per position as a :data:`Top`: ``(token_ids, logprobs)`` arrays
(full-vocabulary log-softmax values, as the servers compute them).

**vLLM** (OpenAI-compatible ``/v1/completions``, with vLLM's extra fields):

* prompt scores: ``{"prompt": [ids], "max_tokens": 1, "prompt_logprobs": N}``; the answer's
  ``choices[0].prompt_logprobs`` is a list as long as the prompt, ``null`` first, then one object
  per position keyed by token id (a string in JSON): ``{"123": {"logprob": -1.2, "rank": 1,
  "decoded_token": "..."}}``. vLLM always adds the prompt's own token to the top N (so an entry has
  N or N + 1 keys) and writes ``-inf`` as ``-9999.0``. N is capped by the server's
  ``--max-logprobs`` (default 20: launch with ``--max-logprobs 4096``).
* next-token scores: ``{"logprobs": N, "return_tokens_as_token_ids": true}``; the answer's
  ``choices[0].logprobs.top_logprobs[0]`` maps ``"token_id:123"`` to a log-probability.
* generation: ``allowed_token_ids`` restricts sampling to the DNA block, ``ignore_eos``,
  ``stop_token_ids``, ``seed``; the new ids are read from ``logprobs.tokens`` (``"token_id:123"``).

**SGLang** (native ``/generate``): ``{"input_ids": [...], "sampling_params": {...},
"return_logprob": true, "logprob_start_len": 0, "top_logprobs_num": N}``; the answer's ``meta_info``
holds ``input_token_logprobs`` (``[logprob, token_id, text]`` per prompt token, ``logprob`` null
for the first) and ``input_top_logprobs`` (per prompt token, ``null`` for the first, else a list of
``[logprob, token_id, text]``); ``output_top_logprobs[0]`` is the distribution of the first new
token. The prompt token's own log-probability is merged into each position's top N.

**hexamer**'s server speaks the vLLM format.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from hexamer.remote.errors import MalformedResponse, RemoteError
from hexamer.remote.http import Connection

Backend = Literal["vllm", "sglang", "hexamer"]
BACKENDS: tuple[str, ...] = ("vllm", "sglang", "hexamer")

#: one position's returned log-probabilities: (token ids int64, log-probabilities float64)
Top = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class ServerInfo:
    """What ``/v1/models`` (and the probe) told us about a server."""

    backend: str
    models: tuple[str, ...]
    max_model_len: int | None = None
    root: str | None = None  # vLLM: the model path on the server
    #: hexamer's server: its model's embedding facts and request limits (``None`` elsewhere)
    hexamer: HexamerFacts | None = None


@dataclass(frozen=True)
class HexamerFacts:
    """What hexamer's ``/v1/models`` adds to vLLM's fields (``"hexamer": {...}``): the size and
    layer count of the model's hidden states, and the server's limits per request (sequences,
    bases per sequence, body bytes)."""

    hidden_size: int
    num_layers: int
    max_prompts: int
    max_bp: int
    max_body_bytes: int

    @classmethod
    def parse(cls, value: Any) -> HexamerFacts | None:
        """The facts of a ``/v1/models`` entry's ``"hexamer"`` object; None when absent or partial."""
        if not isinstance(value, dict):
            return None
        names = ("hidden_size", "num_layers", "max_prompts", "max_bp", "max_body_bytes")
        numbers = [value.get(name) for name in names]
        if not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in numbers):
            return None
        return cls(*numbers)  # type: ignore[arg-type]


def _bad(url: str, what: str) -> MalformedResponse:
    return MalformedResponse(f"{url}: malformed response: {what}", url=url)


def _top_from_pairs(ids: list[int], lps: list[float]) -> Top:
    return np.asarray(ids, dtype=np.int64), np.asarray(lps, dtype=np.float64)


# --------------------------------------------------------------------------- detection


async def detect(conn: Connection, backend: str = "auto") -> ServerInfo:
    """Ask ``/v1/models`` which models are served and by whom.

    ``owned_by`` is ``"vllm"`` on vLLM, ``"sglang"`` on SGLang and ``"hexamer"`` on hexamer's
    server; anything else is probed for SGLang's ``/get_model_info`` and otherwise taken for an
    OpenAI-compatible server with vLLM's extensions.
    """
    if backend not in ("auto", *BACKENDS):
        raise ValueError(f"backend must be 'auto' or one of {', '.join(BACKENDS)}, got {backend!r}")
    url = conn.url("/v1/models")
    body = await conn.get("/v1/models")
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list) or not all(isinstance(m, dict) and "id" in m for m in data):
        raise _bad(url, f"expected {{'data': [{{'id': ...}}, ...]}}, got {str(body)[:200]}")
    models = tuple(str(m["id"]) for m in data)
    first = data[0] if data else {}
    max_len = first.get("max_model_len")
    root = first.get("root")
    if backend == "auto":
        owner = str(first.get("owned_by", "")).lower()
        if owner in BACKENDS:
            backend = owner
        else:
            try:
                probe = await conn.get("/get_model_info")
                backend = "sglang" if isinstance(probe, dict) and "model_path" in probe else "vllm"
            except RemoteError:
                backend = "vllm"
    return ServerInfo(
        backend=backend,
        models=models,
        max_model_len=int(max_len) if isinstance(max_len, int) and max_len > 0 else None,
        root=str(root) if isinstance(root, str) else None,
        hexamer=HexamerFacts.parse(first.get("hexamer")) if backend == "hexamer" else None,
    )


# --------------------------------------------------------------------------- vLLM format


def _vllm_choice(url: str, body: Any) -> dict[str, Any]:
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise _bad(url, f"no 'choices' list in {str(body)[:200]}")
    return choices[0]


def _vllm_prompt_entry(url: str, entry: Any, position: int) -> Top:
    if not isinstance(entry, dict):
        raise _bad(url, f"prompt_logprobs[{position}] is a {type(entry).__name__}, expected an object")
    ids: list[int] = []
    lps: list[float] = []
    for key, value in entry.items():
        lp = value.get("logprob") if isinstance(value, dict) else value
        try:
            ids.append(int(key))
            lps.append(float(lp))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise _bad(url, f"prompt_logprobs[{position}] has entry {key!r}: {value!r}") from None
    return _top_from_pairs(ids, lps)


def _token_id(url: str, key: Any, where: str) -> int:
    text = str(key)
    if text.startswith("token_id:"):
        text = text[len("token_id:") :]
    try:
        return int(text)
    except ValueError:
        raise _bad(
            url,
            f"{where} names token {key!r}, not a token id (the server ignored "
            "return_tokens_as_token_ids; DNA 6-mers cannot be told apart from text by their strings)",
        ) from None


class VllmFormat:
    """vLLM's OpenAI-compatible completions API (also hexamer's server)."""

    path = "/v1/completions"
    server_generation = True  # supports allowed_token_ids: DNA-only sampling on the server

    def __init__(self, model: str) -> None:
        self.model = model

    def _base(self, ids: Sequence[int], max_tokens: int) -> dict[str, Any]:
        return {"model": self.model, "prompt": list(ids), "max_tokens": max_tokens}

    async def prompt_tops(self, conn: Connection, ids: Sequence[int], top_n: int) -> list[Top | None]:
        body = {**self._base(ids, 1), "temperature": 1.0, "prompt_logprobs": top_n}
        url = conn.url(self.path)
        answer = await conn.post(self.path, body)
        plp = _vllm_choice(url, answer).get("prompt_logprobs")
        if not isinstance(plp, list):
            raise _bad(url, "no 'prompt_logprobs' list in the choice (is this a vLLM-compatible server?)")
        if len(plp) != len(ids):
            raise _bad(url, f"prompt_logprobs has {len(plp)} entries for a prompt of {len(ids)} tokens")
        return [None if e is None else _vllm_prompt_entry(url, e, i) for i, e in enumerate(plp)]

    async def next_top(self, conn: Connection, ids: Sequence[int], top_n: int) -> Top:
        body = {
            **self._base(ids, 1),
            "temperature": 1.0,
            "logprobs": top_n,
            "return_tokens_as_token_ids": True,
        }
        url = conn.url(self.path)
        choice = _vllm_choice(url, await conn.post(self.path, body))
        logprobs = choice.get("logprobs")
        tops = logprobs.get("top_logprobs") if isinstance(logprobs, dict) else None
        if not isinstance(tops, list) or not tops or not isinstance(tops[0], dict):
            raise _bad(url, "no 'logprobs.top_logprobs[0]' object in the choice")
        ids_out, lps = [], []
        for key, value in tops[0].items():
            ids_out.append(_token_id(url, key, "logprobs.top_logprobs[0]"))
            try:
                lps.append(float(value))
            except (TypeError, ValueError):
                raise _bad(url, f"logprobs.top_logprobs[0][{key!r}] = {value!r} is not a number") from None
        return _top_from_pairs(ids_out, lps)

    async def generate(
        self,
        conn: Connection,
        ids: Sequence[int],
        *,
        n_tokens: int,
        temperature: float,
        top_p: float,
        seed: int | None,
        allowed: Sequence[int],
        stop: Sequence[int],
    ) -> tuple[list[int], str]:
        body: dict[str, Any] = {
            **self._base(ids, n_tokens),
            "temperature": temperature,
            "top_p": top_p,
            "ignore_eos": True,
            "allowed_token_ids": list(allowed),
            "logprobs": 1,
            "return_tokens_as_token_ids": True,
            "skip_special_tokens": False,
        }
        if stop:
            body["stop_token_ids"] = list(stop)
        if seed is not None:
            body["seed"] = seed
        url = conn.url(self.path)
        choice = _vllm_choice(url, await conn.post(self.path, body))
        logprobs = choice.get("logprobs")
        tokens = logprobs.get("tokens") if isinstance(logprobs, dict) else None
        if not isinstance(tokens, list):
            raise _bad(url, "no 'logprobs.tokens' list in the choice")
        return [_token_id(url, t, "logprobs.tokens") for t in tokens], str(choice.get("finish_reason"))


# --------------------------------------------------------------------------- SGLang format


def _sglang_meta(url: str, body: Any) -> dict[str, Any]:
    if isinstance(body, list) and len(body) == 1:
        body = body[0]
    meta = body.get("meta_info") if isinstance(body, dict) else None
    if not isinstance(meta, dict):
        raise _bad(url, f"no 'meta_info' object in {str(body)[:200]}")
    return meta


def _sglang_triples(url: str, items: Any, where: str) -> Top:
    if not isinstance(items, list):
        raise _bad(url, f"{where} is a {type(items).__name__}, expected a list of [logprob, token_id, text]")
    ids, lps = [], []
    for item in items:
        if not isinstance(item, list | tuple) or len(item) < 2:
            raise _bad(url, f"{where} holds {item!r}, expected [logprob, token_id, text]")
        try:
            lps.append(float(item[0]) if item[0] is not None else -np.inf)
            ids.append(int(item[1]))
        except (TypeError, ValueError):
            raise _bad(url, f"{where} holds {item!r}, expected [logprob, token_id, text]") from None
    return _top_from_pairs(ids, lps)


class SglangFormat:
    """SGLang's native ``/generate`` API (token-id input, input and output top log-probabilities)."""

    path = "/generate"
    server_generation = False  # no allowed-token restriction: DNA-only sampling runs client-side

    def __init__(self, model: str) -> None:
        self.model = model

    async def prompt_tops(self, conn: Connection, ids: Sequence[int], top_n: int) -> list[Top | None]:
        body = {
            "input_ids": list(ids),
            "sampling_params": {"max_new_tokens": 1, "temperature": 1.0},
            "return_logprob": True,
            "logprob_start_len": 0,
            "top_logprobs_num": top_n,
            "return_text_in_logprobs": False,
        }
        url = conn.url(self.path)
        meta = _sglang_meta(url, await conn.post(self.path, body))
        tops = meta.get("input_top_logprobs")
        own = meta.get("input_token_logprobs")
        if not isinstance(tops, list) or not isinstance(own, list):
            raise _bad(url, "meta_info lacks 'input_top_logprobs' / 'input_token_logprobs' lists")
        if len(tops) != len(ids) or len(own) != len(ids):
            raise _bad(
                url,
                f"got {len(tops)} input_top_logprobs and {len(own)} input_token_logprobs "
                f"for a prompt of {len(ids)} tokens",
            )
        out: list[Top | None] = []
        for i, entry in enumerate(tops):
            if i == 0 or entry is None:
                out.append(None)
                continue
            t_ids, t_lps = _sglang_triples(url, entry, f"input_top_logprobs[{i}]")
            own_ids, own_lps = _sglang_triples(url, [own[i]], f"input_token_logprobs[{i}]")
            if own_ids[0] != ids[i]:
                raise _bad(
                    url, f"input_token_logprobs[{i}] is for token {own_ids[0]}, the prompt has {ids[i]}"
                )
            if not np.isin(own_ids, t_ids).all():  # the prompt's own token, when outside the top N
                t_ids, t_lps = np.concatenate([t_ids, own_ids]), np.concatenate([t_lps, own_lps])
            out.append((t_ids, t_lps))
        return out

    async def next_top(self, conn: Connection, ids: Sequence[int], top_n: int) -> Top:
        body = {
            "input_ids": list(ids),
            "sampling_params": {"max_new_tokens": 1, "temperature": 1.0},
            "return_logprob": True,
            "top_logprobs_num": top_n,
            "return_text_in_logprobs": False,
        }
        url = conn.url(self.path)
        meta = _sglang_meta(url, await conn.post(self.path, body))
        tops = meta.get("output_top_logprobs")
        if not isinstance(tops, list) or not tops or tops[0] is None:
            raise _bad(url, "meta_info lacks 'output_top_logprobs[0]'")
        return _sglang_triples(url, tops[0], "output_top_logprobs[0]")


def make_format(backend: str, model: str) -> VllmFormat | SglangFormat:
    if backend == "sglang":
        return SglangFormat(model)
    if backend in ("vllm", "hexamer"):
        return VllmFormat(model)
    raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
