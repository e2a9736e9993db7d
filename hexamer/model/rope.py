"""Rotary position embeddings: inverse frequencies, attention scaling and cos/sin tables.

The numbers follow transformers' RoPE initialisers (default, linear, llama3, YaRN) operation for
operation in float32, so that long-context Carbon runs (YaRN x4) reproduce the reference logits.
Everything here is stateless: the frequencies depend only on the config, never on the running
sequence length, which keeps KV-cache entries valid for the whole generation.
"""

from __future__ import annotations

import math

import torch

from hexamer.model.config import RopeConfig

__all__ = ["apply_rope", "rope_cos_sin", "rope_frequencies"]


def rope_frequencies(rope: RopeConfig, head_dim: int) -> tuple[torch.Tensor, float]:
    """Inverse frequencies (float32, shape ``(head_dim // 2,)``, CPU) and the cos/sin scale.

    The scale is 1.0 except for YaRN, whose ``attention_factor`` (``mscale``) multiplies both cos
    and sin, i.e. sharpens attention logits by its square, as in the reference implementation.
    """
    base = torch.arange(0, head_dim, 2, dtype=torch.int64, device="cpu").to(torch.float32) / head_dim
    plain = 1.0 / (rope.theta**base)
    if rope.rope_type == "default":
        return plain, 1.0
    if rope.rope_type == "linear":
        assert rope.factor is not None
        return plain / rope.factor, 1.0
    if rope.rope_type == "llama3":
        return _llama3(plain, rope), 1.0
    if rope.rope_type == "yarn":
        return _yarn(rope, head_dim)
    raise ValueError(f"unsupported rope type {rope.rope_type!r}")


def _llama3(inv_freq: torch.Tensor, rope: RopeConfig) -> torch.Tensor:
    """Llama-3.1 scaling: slow waves divided by ``factor``, fast ones kept, a smooth blend between."""
    assert rope.factor is not None and rope.low_freq_factor is not None and rope.high_freq_factor is not None
    assert rope.original_max_position_embeddings is not None
    factor, low, high = rope.factor, rope.low_freq_factor, rope.high_freq_factor
    context = rope.original_max_position_embeddings
    long_wave = context / low  # wavelengths above this are fully interpolated
    short_wave = context / high  # wavelengths below this are untouched
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > long_wave, inv_freq / factor, inv_freq)
    smooth = (context / wavelen - low) / (high - low)
    blended = (1 - smooth) * scaled / factor + smooth * scaled
    in_between = (wavelen >= short_wave) & (wavelen <= long_wave)
    return torch.where(in_between, blended, scaled)


def _yarn_mscale(scale: float, mscale: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def _yarn(rope: RopeConfig, dim: int) -> tuple[torch.Tensor, float]:
    """YaRN: interpolate low-frequency dims, extrapolate high-frequency ones, ramp in between."""
    assert rope.factor is not None and rope.original_max_position_embeddings is not None
    factor, theta = rope.factor, rope.theta
    context = rope.original_max_position_embeddings

    if rope.attention_factor is not None:
        attention = rope.attention_factor
    elif rope.mscale and rope.mscale_all_dim:
        attention = _yarn_mscale(factor, rope.mscale) / _yarn_mscale(factor, rope.mscale_all_dim)
    else:
        attention = _yarn_mscale(factor)

    # Zero/None fall back to the paper's defaults, as in the reference code.
    beta_fast = rope.beta_fast or 32.0
    beta_slow = rope.beta_slow or 1.0

    def dim_for_rotations(rotations: float) -> float:
        # Dimension index whose wavelength fits `rotations` times into the original context.
        return dim * math.log(context / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low, high = dim_for_rotations(beta_fast), dim_for_rotations(beta_slow)
    if rope.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # avoid a zero-width ramp

    pos_freqs = theta ** (torch.arange(0, dim, 2, device="cpu").to(torch.float32) / dim)
    extrapolated = 1.0 / pos_freqs
    interpolated = 1.0 / (factor * pos_freqs)
    ramp = ((torch.arange(dim // 2, dtype=torch.float32, device="cpu") - low) / (high - low)).clamp(0, 1)
    keep = 1 - ramp  # 1 = keep the original (extrapolated) frequency
    inv_freq = interpolated * (1 - keep) + extrapolated * keep
    return inv_freq, float(attention)


def rope_cos_sin(
    inv_freq: torch.Tensor, positions: torch.Tensor, scale: float, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin tables of shape ``(*positions.shape, head_dim)`` for arbitrary (ragged) positions.

    Computed in float32 and cast to the activation dtype last, like the reference model, so bf16
    runs round the same way.
    """
    freqs = positions.to(torch.float32)[..., None] * inv_freq.to(device=positions.device, dtype=torch.float32)
    cos = freqs.cos()
    sin = freqs.sin()
    if scale != 1.0:
        cos = cos * scale
        sin = sin * scale
    cos = torch.cat((cos, cos), dim=-1).to(dtype)
    sin = torch.cat((sin, sin), dim=-1).to(dtype)
    return cos, sin


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` of shape ``(B, heads, T, head_dim)`` with tables of shape ``(B, T, head_dim)``.

    Uses the half-split ("rotate_half") pairing that Hugging Face Llama checkpoints are stored in.
    """
    cos = cos.unsqueeze(1)
    sin = sin.unsqueeze(1)
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    rotated = torch.cat((-x2, x1), dim=-1)
    return x * cos + rotated * sin
