"""Model configuration: the subset of a Hugging Face Llama ``config.json`` that inference needs.

Carbon checkpoints are stock ``LlamaForCausalLM``; this module turns their ``config.json`` into a
validated, immutable :class:`ModelConfig` so that the model code never has to guess defaults or
deal with the two RoPE layouts (transformers v4 ``rope_theta`` + ``rope_scaling`` and v5
``rope_parameters``).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hexamer.folder_files import checked_file, read_json_object

__all__ = ["SUPPORTED_DTYPES", "ModelConfig", "RopeConfig", "read_config_json"]

#: Weight dtypes a config may name (``torch_dtype`` in v4, ``dtype`` in v5).
SUPPORTED_DTYPES = ("float32", "bfloat16", "float16")

#: RoPE variants this package computes; others are rejected instead of silently mis-computed.
SUPPORTED_ROPE_TYPES = ("default", "linear", "llama3", "yarn")

_DEFAULT_ROPE_THETA = 10_000.0

#: a config.json is a few KB; anything this large is not one (and is not read into memory)
MAX_CONFIG_BYTES = 16 * 2**20


def read_config_json(path: str | Path, root: str | Path | None = None) -> dict[str, Any]:
    """The JSON object in a model folder's ``config.json`` at ``path``, read only after the checks
    every folder reader applies: a regular file (a FIFO would block the read forever), inside the
    folder ``root`` (default: ``path``'s folder) when it is a symlink, at most
    :data:`MAX_CONFIG_BYTES`, valid UTF-8 JSON holding an object. Errors name the file
    (``FileNotFoundError`` when absent, ``ValueError`` otherwise)."""
    path = Path(path)
    try:
        checked_file(path, path.parent if root is None else Path(root))
    except FileNotFoundError:
        raise FileNotFoundError(f"config.json not found: {path}") from None
    size = os.stat(path).st_size
    if size > MAX_CONFIG_BYTES:
        raise ValueError(f"{path} is {size:,} bytes; a config.json is a few KB (limit {MAX_CONFIG_BYTES:,})")
    return read_json_object(path)


@dataclass(frozen=True)
class RopeConfig:
    """RoPE parameters after normalisation of the v4/v5 config layouts.

    ``rope_type`` is one of ``default``, ``linear``, ``llama3``, ``yarn``. Fields a type does not use
    stay ``None``. ``original_max_position_embeddings`` is filled for ``llama3`` and ``yarn``
    (falling back to ``max_position_embeddings`` like transformers does).
    """

    rope_type: str = "default"
    theta: float = _DEFAULT_ROPE_THETA
    factor: float | None = None
    original_max_position_embeddings: int | None = None
    # llama3
    low_freq_factor: float | None = None
    high_freq_factor: float | None = None
    # yarn
    attention_factor: float | None = None
    beta_fast: float | None = None
    beta_slow: float | None = None
    mscale: float | None = None
    mscale_all_dim: float | None = None
    truncate: bool = True


@dataclass(frozen=True)
class ModelConfig:
    """Architecture hyper-parameters of a Llama causal LM, parsed from ``config.json``.

    Build it with :meth:`from_dict` / :meth:`from_file`; every value is validated there so that
    a malformed checkpoint fails at load time with a message naming the offending field.
    """

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float = 1e-6
    max_position_embeddings: int = 2048
    rope: RopeConfig = field(default_factory=RopeConfig)
    tie_word_embeddings: bool = False
    attention_bias: bool = False
    mlp_bias: bool = False
    dtype: str | None = None
    bos_token_id: int | None = None
    eos_token_ids: tuple[int, ...] = ()
    pad_token_id: int | None = None

    @property
    def rope_theta(self) -> float:
        """RoPE base frequency (shortcut for ``rope.theta``)."""
        return self.rope.theta

    @property
    def num_kv_groups(self) -> int:
        """Query heads per KV head (1 for MHA)."""
        return self.num_attention_heads // self.num_key_value_heads

    def torch_dtype(self) -> Any:
        """The checkpoint's declared weight dtype as a ``torch.dtype`` (``None`` if undeclared)."""
        if self.dtype is None:
            return None
        import torch

        return getattr(torch, self.dtype)

    @classmethod
    def from_file(cls, path: str | Path) -> ModelConfig:
        """Parse a ``config.json`` file; errors name the file so users know which folder is bad."""
        path = Path(path)
        raw = read_config_json(path)
        try:
            return cls.from_dict(raw)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> ModelConfig:
        """Validate a Hugging Face Llama config dict and normalise it (v4 and v5 layouts)."""
        _check_architecture(raw)

        vocab_size = _pos_int(raw, "vocab_size")
        hidden_size = _pos_int(raw, "hidden_size")
        intermediate_size = _pos_int(raw, "intermediate_size")
        num_layers = _pos_int(raw, "num_hidden_layers")
        num_heads = _pos_int(raw, "num_attention_heads")
        num_kv_heads = _pos_int(raw, "num_key_value_heads", default=num_heads)
        if num_heads % num_kv_heads:
            raise ValueError(
                f"'num_attention_heads' ({num_heads}) must be a multiple of 'num_key_value_heads' ({num_kv_heads})"
            )
        if raw.get("head_dim") is None:
            if hidden_size % num_heads:
                raise ValueError(
                    f"'head_dim' is absent and 'hidden_size' ({hidden_size}) is not divisible by "
                    f"'num_attention_heads' ({num_heads})"
                )
            head_dim = hidden_size // num_heads
        else:
            head_dim = _pos_int(raw, "head_dim")
        if head_dim % 2:
            raise ValueError(f"'head_dim' must be even for rotary embeddings, got {head_dim}")

        act = raw.get("hidden_act", "silu")
        if act != "silu":
            raise ValueError(f"'hidden_act' must be 'silu' for a Llama model, got {act!r}")

        max_pos = _pos_int(raw, "max_position_embeddings", default=2048)
        return cls(
            vocab_size=vocab_size,
            hidden_size=hidden_size,
            intermediate_size=intermediate_size,
            num_hidden_layers=num_layers,
            num_attention_heads=num_heads,
            num_key_value_heads=num_kv_heads,
            head_dim=head_dim,
            rms_norm_eps=_pos_float(raw, "rms_norm_eps", default=1e-6),
            max_position_embeddings=max_pos,
            rope=_parse_rope(raw, max_pos),
            tie_word_embeddings=_bool(raw, "tie_word_embeddings", default=False),
            attention_bias=_bool(raw, "attention_bias", default=False),
            mlp_bias=_bool(raw, "mlp_bias", default=False),
            dtype=_parse_dtype(raw),
            bos_token_id=_opt_token(raw, "bos_token_id"),
            eos_token_ids=_token_list(raw, "eos_token_id"),
            pad_token_id=_opt_token(raw, "pad_token_id"),
        )


# ---------------------------------------------------------------------------------------------
# field helpers


def _check_architecture(raw: dict[str, Any]) -> None:
    model_type = raw.get("model_type")
    if model_type is not None and model_type != "llama":
        raise ValueError(
            f"'model_type' is {model_type!r}; hexamer only runs Llama-architecture models (model_type 'llama')"
        )
    archs = raw.get("architectures")
    if archs is not None:
        if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
            raise ValueError(f"'architectures' must be a list of strings, got {archs!r}")
        if "LlamaForSequenceClassification" in archs:
            raise ValueError(
                "'architectures' is ['LlamaForSequenceClassification']: this is a fine-tuned "
                "sequence-classification head folder, not a language model; load it with "
                "hexamer.finetune.load_classifier (or predict with it through hexamer.finetune.predict)"
            )
        if archs and not any(a in ("LlamaForCausalLM", "LlamaModel") for a in archs):
            raise ValueError(f"'architectures' is {archs}; hexamer only runs 'LlamaForCausalLM' checkpoints")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _pos_int(raw: dict[str, Any], key: str, default: int | None = None) -> int:
    value = raw.get(key)
    if value is None:
        if default is None:
            raise ValueError(f"config is missing required field '{key}'")
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"'{key}' must be a positive integer, got {value!r}")
    return value


def _pos_float(raw: dict[str, Any], key: str, default: float) -> float:
    value = raw.get(key)
    if value is None:
        return default
    if not _is_number(value) or value <= 0:
        raise ValueError(f"'{key}' must be a positive number, got {value!r}")
    return float(value)


def _bool(raw: dict[str, Any], key: str, default: bool) -> bool:
    value = raw.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ValueError(f"'{key}' must be true or false, got {value!r}")
    return value


def _opt_token(raw: dict[str, Any], key: str) -> int | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"'{key}' must be a non-negative integer, got {value!r}")
    return value


def _token_list(raw: dict[str, Any], key: str) -> tuple[int, ...]:
    value = raw.get(key)
    if value is None:
        return ()
    values = value if isinstance(value, list) else [value]
    for v in values:
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ValueError(f"'{key}' must be a non-negative integer or a list of them, got {value!r}")
    return tuple(values)


def _parse_dtype(raw: dict[str, Any]) -> str | None:
    key = "dtype" if raw.get("dtype") is not None else "torch_dtype"
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, str) and value.startswith("torch."):
        value = value[len("torch.") :]
    if value not in SUPPORTED_DTYPES:
        raise ValueError(f"'{key}' must be one of {list(SUPPORTED_DTYPES)}, got {value!r}")
    return value


def _rope_number(params: dict[str, Any], key: str, *, required: bool, positive: bool = True) -> float | None:
    value = params.get(key)
    if value is None:
        if required:
            raise ValueError(f"rope parameters of type {params.get('rope_type')!r} need '{key}'")
        return None
    if not _is_number(value) or (positive and value <= 0):
        raise ValueError(f"rope parameter '{key}' must be a positive number, got {value!r}")
    return float(value)


def _parse_rope(raw: dict[str, Any], max_pos: int) -> RopeConfig:
    """Normalise v4 (``rope_theta`` + ``rope_scaling``) and v5 (``rope_parameters``) layouts.

    Precedence follows transformers: a non-empty ``rope_scaling`` wins over ``rope_parameters``;
    ``rope_theta`` inside the dict wins over the top-level one; ``type`` is an alias of ``rope_type``.
    """
    scaling = raw.get("rope_scaling") or raw.get("rope_parameters") or {}
    if not isinstance(scaling, dict):
        raise ValueError(f"'rope_scaling'/'rope_parameters' must be an object, got {scaling!r}")
    if any(isinstance(v, dict) for v in scaling.values()):
        raise ValueError("per-layer-type 'rope_parameters' are not supported for Llama models")
    params = dict(scaling)

    rope_type = params.get("rope_type", params.get("type")) or "default"
    if rope_type not in SUPPORTED_ROPE_TYPES:
        raise ValueError(
            f"rope type {rope_type!r} is not supported (supported: {', '.join(SUPPORTED_ROPE_TYPES)})"
        )
    params["rope_type"] = rope_type

    theta = params.get("rope_theta")
    if theta is None:
        theta = raw.get("rope_theta", _DEFAULT_ROPE_THETA)
    if not _is_number(theta) or theta <= 1:
        raise ValueError(f"'rope_theta' must be a number > 1, got {theta!r}")

    partial = params.get("partial_rotary_factor", raw.get("partial_rotary_factor"))
    if partial not in (None, 1, 1.0):
        raise ValueError(f"'partial_rotary_factor' must be 1.0 for Llama models, got {partial!r}")

    if rope_type == "default":
        return RopeConfig(rope_type="default", theta=float(theta))

    if rope_type == "linear":
        return RopeConfig(
            rope_type="linear", theta=float(theta), factor=_rope_number(params, "factor", required=True)
        )

    # llama3 and yarn know the pre-extension context length; transformers falls back to a
    # top-level 'original_max_position_embeddings', then to 'max_position_embeddings'.
    orig = params.get("original_max_position_embeddings")
    if orig is None:
        orig = raw.get("original_max_position_embeddings", max_pos)
    if not isinstance(orig, int) or isinstance(orig, bool) or orig <= 0:
        raise ValueError(
            f"rope parameter 'original_max_position_embeddings' must be a positive integer, got {orig!r}"
        )

    if rope_type == "llama3":
        low = _rope_number(params, "low_freq_factor", required=True)
        high = _rope_number(params, "high_freq_factor", required=True)
        assert low is not None and high is not None
        if high <= low:
            raise ValueError(
                f"rope parameter 'high_freq_factor' ({high}) must be greater than 'low_freq_factor' ({low})"
            )
        return RopeConfig(
            rope_type="llama3",
            theta=float(theta),
            factor=_rope_number(params, "factor", required=True),
            original_max_position_embeddings=orig,
            low_freq_factor=low,
            high_freq_factor=high,
        )

    # yarn: a missing factor means "the ratio of the extended to the original window".
    factor = _rope_number(params, "factor", required=False)
    if factor is None:
        factor = max_pos / orig
    truncate = params.get("truncate", True)
    if not isinstance(truncate, bool):
        raise ValueError(f"rope parameter 'truncate' must be true or false, got {truncate!r}")
    attention_factor = params.get("attention_factor")
    if attention_factor is not None and (not _is_number(attention_factor) or attention_factor < 0):
        raise ValueError(
            f"rope parameter 'attention_factor' must be a non-negative number, got {attention_factor!r}"
        )
    return RopeConfig(
        rope_type="yarn",
        theta=float(theta),
        factor=factor,
        original_max_position_embeddings=orig,
        attention_factor=None if attention_factor is None else float(attention_factor),
        beta_fast=_rope_number(params, "beta_fast", required=False, positive=False),
        beta_slow=_rope_number(params, "beta_slow", required=False, positive=False),
        mscale=_rope_number(params, "mscale", required=False, positive=False),
        mscale_all_dim=_rope_number(params, "mscale_all_dim", required=False, positive=False),
        truncate=truncate,
    )
