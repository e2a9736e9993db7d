"""Request bodies, validated strictly: unknown fields, wrong JSON types and non-finite numbers are
400s naming the field.

The completion and embedding bodies accept every field of the OpenAI API and the vLLM extras its
clients send (``ignore_eos``, ``min_tokens``, ``top_k``, ``prompt_logprobs``, ...), so the official
``openai`` client and vLLM's benchmark client work unchanged; the few we cannot honour (penalties,
guided decoding, beam search) are refused with a clear message when set to a non-default value.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from hexamer.server.settings import MAX_DRAFT_TOKENS
from hexamer.vep.recipes import DEFAULT_WINDOW

_I64 = 2**63


class _Body(BaseModel):
    """Every body: unknown fields and loose types refused; every float field finite (``NaN``,
    ``Infinity`` and overflowing literals such as ``1e400`` are a 400 naming the field; Python's
    JSON would otherwise let them through as floats)."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class StreamOptions(_Body):
    include_usage: bool | None = True
    continuous_usage_stats: bool | None = False


class CompletionRequest(_Body):
    # OpenAI fields
    model: str | None = None
    prompt: str | list[str] | list[int] | list[list[int]]
    best_of: int | None = None
    echo: bool | None = False
    frequency_penalty: float | None = 0.0
    logit_bias: dict[str, float] | None = None
    logprobs: int | None = Field(default=None, ge=0)
    max_tokens: int | None = Field(default=16, ge=0)
    n: int = Field(default=1, ge=1)
    presence_penalty: float | None = 0.0
    seed: int | None = Field(default=None, ge=-_I64, lt=_I64)
    stop: str | list[str] | None = None
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    suffix: str | None = None
    temperature: float | None = Field(default=None, ge=0)
    top_p: float | None = Field(default=None, gt=0, le=1)
    user: str | None = None
    # vLLM sampling extras
    use_beam_search: bool = False
    top_k: int | None = Field(default=None, ge=-1)
    min_p: float | None = Field(default=None, ge=0, le=1)
    repetition_penalty: float | None = None
    length_penalty: float = 1.0
    stop_token_ids: list[int] | None = None
    include_stop_str_in_output: bool = False
    ignore_eos: bool = False
    min_tokens: int = Field(default=0, ge=0)
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    truncate_prompt_tokens: int | None = Field(default=None, ge=1)
    allowed_token_ids: list[int] | None = None
    prompt_logprobs: int | None = Field(default=None, ge=0)
    # vLLM extra parameters
    add_special_tokens: bool = True
    response_format: dict[str, Any] | None = None
    guided_json: Any = None
    guided_regex: str | None = None
    guided_choice: list[str] | None = None
    guided_grammar: str | None = None
    guided_decoding_backend: str | None = None
    guided_whitespace_pattern: str | None = None
    priority: int = 0
    request_id: str | None = None
    logits_processors: list[Any] | None = None
    return_tokens_as_token_ids: bool | None = None
    return_token_ids: bool | None = None
    cache_salt: str | None = None
    kv_transfer_params: dict[str, Any] | None = None
    vllm_xargs: dict[str, Any] | None = None
    prompt_embeds: Any = None


class EmbeddingRequest(_Body):
    model: str | None = None
    input: str | list[str] | list[int] | list[list[int]]
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = None
    user: str | None = None
    # vLLM extras
    truncate_prompt_tokens: int | None = None
    add_special_tokens: bool = True
    priority: int = 0
    request_id: str | None = None
    normalize: bool | None = None
    # hexamer extras: the options of hexamer.embed.embed_sequences (Carbon.embed)
    pool: Literal["mean", "last", "sep"] = "mean"
    layer: int = -1
    prefix: str = ""
    max_tokens: int | None = None
    chunk_overlap: int | None = None


class DnaGenerateRequest(_Body):
    model: str | None = None
    prompt: str | list[str]
    max_bp: int | None = Field(default=None, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)
    mode: Literal["bp", "token"] = "bp"
    temperature: float = Field(default=1.0, ge=0)
    top_p: float = Field(default=1.0, gt=0, le=1)
    seed: int | None = Field(default=None, ge=-_I64, lt=_I64)
    n: int = Field(default=1, ge=1)
    mask: str | None = None
    prefix: str = ""
    tags: list[str] | None = None
    stop_at_end_tag: bool = False
    stream: bool = False
    #: speculative decoding with the server's draft model: None = when one is loaded (--draft-model)
    draft: bool | None = None
    num_draft_tokens: int | None = Field(default=None, ge=1, le=MAX_DRAFT_TOKENS)


class DesignMotif(_Body):
    position: int = Field(ge=0)
    motif: str


class DesignOracle(_Body):
    """What oracle-guided design maximises: the served head (``hexamer serve --head``), a position
    weight matrix (``(width, 4)`` rows, columns A, C, G, T; ``counts``: counts turned into log-odds)
    or an IUPAC motif's matches."""

    kind: Literal["head", "pwm", "motif"]
    target: str | None = None
    specificity: bool = False
    matrix: list[list[float]] | None = None
    counts: bool = False
    threshold: float | None = None
    motif: str | None = None


class DnaDesignRequest(_Body):
    model: str | None = None
    length: int | None = Field(default=None, ge=1)
    n: int = Field(default=1, ge=1)
    method: Literal["sample", "beam", "evolve", "anneal", "minimal-edit"] = "sample"
    # hard constraints (hexamer.design.DesignConstraints)
    mask: str | None = None
    prefix: str = ""
    suffix: str = ""
    motifs: list[DesignMotif] = Field(default_factory=list)
    avoid: list[str] = Field(default_factory=list)
    avoid_sites: list[str] = Field(default_factory=list)
    max_homopolymer: int | None = Field(default=None, ge=1)
    gc: list[float] | None = None
    gc_window: int | None = Field(default=None, ge=1)
    translate_to: str | None = None
    # sampling and beam search
    temperature: float = Field(default=1.0, gt=0)
    top_p: float = Field(default=1.0, gt=0, le=1)
    oversample: int = Field(default=1, ge=1)
    width: int = Field(default=8, ge=1)
    min_distance: int = Field(default=1, ge=1)
    seed: int = Field(default=0, ge=0, lt=_I64)
    per_base: bool = False
    # oracle-guided optimisation
    oracle: DesignOracle | None = None
    weight: float = Field(default=0.0, ge=0)
    start: str | None = None
    max_edits: int | None = Field(default=None, ge=0)
    frozen: list[int] = Field(default_factory=list)
    keep: int = Field(default=4, ge=1)
    rounds: int = Field(default=20, ge=1)
    steps: int = Field(default=1000, ge=1)
    t_start: float = Field(default=1.0, gt=0)
    t_end: float = Field(default=0.01, gt=0)


class DnaScoreRequest(_Body):
    model: str | None = None
    sequences: str | list[str]
    level: Literal["bp", "token"] = "bp"
    method: Literal["fns", "exact"] = "fns"
    prefix: str = ""
    tags: list[str] | None = None
    per_position: bool = False


class DnaPredictRequest(_Body):
    model: str | None = None
    sequences: str | list[str]
    #: average with the reverse complement; None = what the head folder was trained with
    rc_average: bool | None = None


class Variant(_Body):
    sequence: str
    pos: int
    ref: str
    alt: str
    id: str | None = None


class DnaVepRequest(_Body):
    model: str | None = None
    variants: list[Variant]
    position_base: Literal[0, 1] = 1
    #: range-checked and fitted to the model by VepSettings, the rule hexamer vep applies
    window: int = DEFAULT_WINDOW
    rc_average: bool = False
