"""Server limits and options, in one place, with the defaults `hexamer serve` uses."""

from __future__ import annotations

from dataclasses import dataclass, fields

#: enough for a client that asks for every 6-mer (4,096) plus the rest of the DNA block and text
DEFAULT_MAX_LOGPROBS = 4096 + 128
#: KV-cache pool on CPU when no ``kv_cache_bytes`` is given: 4 GiB (vLLM's CPU backend takes a
#: fixed ``VLLM_CPU_KVCACHE_SPACE`` too) holds ~37,000 tokens of the 500M shape (112 KiB a token in
#: float32), 64 requests of 1 kb in / 1 kb out, and leaves a shared machine usable; raised to one
#: sequence of ``max_model_len`` when that is larger, and never above 80 % of the free memory.
#: Its pages become resident only as blocks are written, so an idle server holds little more than
#: its weights.
CPU_KV_CACHE_BYTES = 4 * 2**30
#: characters a prompt may carry per token of ``max_model_len`` (the default ``max_prompt_chars``):
#: 4x English text (~4 chars/token) and 2.7x DNA (6 bases/token), so no prompt that fits the
#: context is refused, while a multi-megabyte string is refused before the tokenizer sees it
PROMPT_CHARS_PER_TOKEN = 16
#: most 6-mers a draft may propose per speculative round (``--draft-tokens``, ``num_draft_tokens``)
MAX_DRAFT_TOKENS = 16
#: the longest any ``*_s`` setting may be (about 116 days): a larger one is a slip, not a wish
MAX_SECONDS = 1e7
#: most threads preparing request bodies (``prep_threads``)
MAX_PREP_THREADS = 256
#: log-probabilities and per-position scores one response may carry (``max_response_values``): every
#: 6-mer's log-probability at 1,024 positions; its JSON is 50-300 MB, written while it is sent
DEFAULT_MAX_RESPONSE_VALUES = 4096 * 1024


@dataclass
class ServerSettings:
    """What the server accepts and how much work it takes on.

    max_num_seqs: sequences decoded together (KV-cache rows). max_model_len: tokens per sequence,
        prompt included (default: the model's context). max_queue: requests waiting for a row
        beyond which new ones get 429. max_tokens / max_bp: per request (per choice).
    max_logprobs: largest ``logprobs`` / ``prompt_logprobs`` top-N. max_prompts: prompts (or
        sequences, variants) per request. max_body_bytes: request body size (413 above).
    max_response_values: log-probabilities (``logprobs``, ``prompt_logprobs``) and per-position scores
        one response may carry, counted from the request before any work (400 above;
        :mod:`hexamer.server.response_size`).
    max_prompt_chars: characters per prompt string, checked before tokenising (400 above; default
        ``PROMPT_CHARS_PER_TOKEN`` x max_model_len).
    request_timeout_s: a request still running this long after it arrived is cancelled (504; a
        stream ends with an error event); reading, preparing and queueing it count.
    header_timeout_s: a connection must deliver a request's headers within this (else closed).
    body_timeout_s: a request's whole body must arrive within this after its headers (408).
    keep_alive_s: an idle keep-alive connection is closed after this.
    max_connections: open connections beyond this are answered 503 and closed.
    prep_threads: threads that parse, validate and tokenise request bodies off the event loop.
    api_key: when set, every endpoint but ``/health`` needs ``Authorization: Bearer <key>``.
    served_model_name: the model id reported by ``/v1/models`` and accepted in ``model``.
    shutdown_grace_s: on shutdown, in-flight requests get this long to finish, then are cancelled.
    kv_cache_bytes: KV-cache pool (default: on CPU ``CPU_KV_CACHE_BYTES``, 4 GiB, or one sequence of
        ``max_model_len`` when larger; on GPU 80 % of the free memory; never above 80 % of the free
        memory). Requests are admitted as long as the blocks they may fill are free.

    ``max_num_seqs``, ``max_model_len`` and ``kv_cache_bytes`` (vLLM's names) become the serving
    engine's ``max_batch_size``, ``max_model_len`` and ``kv_cache_bytes``; its other options come
    from the loaded model's :class:`~hexamer.engine.EngineConfig` (``hexamer.server.app``).
    max_design_bp: longest sequence ``/v1/dna/design`` designs. max_design_candidates: most
        sequences one design request may decode or keep at once (``n * oversample``, ``width``,
        ``keep``). max_design_steps: most optimisation rounds or annealing steps. design_timeout_s:
        a design stops this long after its request arrived (504), checked at every 6-mer and step.
    draft_tokens: with a draft model, 6-mers drafted per round (1 to ``MAX_DRAFT_TOKENS``) unless a
        request names its own; None: adaptive (docs/speculative.md).
    """

    max_num_seqs: int = 64
    max_model_len: int | None = None
    max_queue: int = 1024
    max_tokens: int = 8192
    max_bp: int = 49152
    max_logprobs: int = DEFAULT_MAX_LOGPROBS
    max_prompts: int = 256
    max_n: int = 64
    max_body_bytes: int = 32 * 2**20
    max_response_values: int = DEFAULT_MAX_RESPONSE_VALUES
    max_prompt_chars: int | None = None
    request_timeout_s: float = 600.0
    header_timeout_s: float = 10.0
    body_timeout_s: float = 60.0
    keep_alive_s: float = 5.0
    max_connections: int = 512
    prep_threads: int = 2
    api_key: str | None = None
    served_model_name: str | None = None
    shutdown_grace_s: float = 10.0
    kv_cache_bytes: int | None = None
    draft_tokens: int | None = None
    max_design_bp: int = 2048
    max_design_candidates: int = 256
    max_design_steps: int = 10_000
    design_timeout_s: float = 120.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("api_key", "served_model_name"):
                if value is not None and (not isinstance(value, str) or not value):
                    raise ValueError(f"{f.name} must be a non-empty string")
                continue
            if value is None:
                continue
            if f.name.endswith("_s"):
                if (
                    isinstance(value, bool)
                    or not isinstance(value, int | float)
                    or not 0 < value <= MAX_SECONDS
                ):
                    raise ValueError(
                        f"server setting {f.name} must be a number of seconds in (0, {MAX_SECONDS:g}], got {value!r}"
                    )
            elif isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"server setting {f.name} must be a positive integer, got {value!r}")
        if self.prep_threads > MAX_PREP_THREADS:
            raise ValueError(f"prep_threads must be at most {MAX_PREP_THREADS}, got {self.prep_threads}")
        if self.draft_tokens is not None and not (
            isinstance(self.draft_tokens, int) and 1 <= self.draft_tokens <= MAX_DRAFT_TOKENS
        ):
            raise ValueError(
                f"draft_tokens must be an integer in [1, {MAX_DRAFT_TOKENS}], got {self.draft_tokens!r}"
            )

    def prompt_chars(self, max_len: int) -> int:
        """``max_prompt_chars``, or its default for a context of ``max_len`` tokens."""
        return self.max_prompt_chars or PROMPT_CHARS_PER_TOKEN * max_len

    @classmethod
    def from_options(cls, **options: object) -> ServerSettings:
        """Settings from keyword options; an unknown name is an error naming it."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise TypeError(
                f"unknown server setting(s): {', '.join(unknown)} (known: {', '.join(sorted(known))})"
            )
        return cls(**options)  # type: ignore[arg-type]
