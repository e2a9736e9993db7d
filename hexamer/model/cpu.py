"""CPU fast path: the decoder's linear layers with weights re-laid-out once at load, and, with
hexamer's own kernels, the rest of a decode step (attention with its rotary embedding and cache
write, RMSNorm, the DNA rows of the LM head) as one C call each instead of runs of small PyTorch
ops.

Two back ends for the linears. :class:`PanelLinear` (default where it builds) runs hexamer's own C kernel
(:mod:`hexamer.model.native`, ``panel_gemm.c``) on weights stored in 32-column panels: one
sequential stream through the weights per projection, fp32 accumulation, bf16 weights widened in
registers. :class:`PackedLinear` (the fallback) uses oneDNN, as follows.

At decode batch sizes (1-64 rows) PyTorch's default GEMM reaches only part of the memory bandwidth;
oneDNN's packed-weight kernels do markedly better while prefill stays as fast. :class:`PackedLinear`
calls ``torch.ops.mkldnn._linear_pointwise`` (the kernel Inductor's CPU freezing path uses) on dense
activations: unlike ``torch.utils.mkldnn.MkldnnLinear`` it does not convert the input to a oneDNN
tensor and the output back on every call, which cost about as much as the matmul itself at decode
shapes (profile of a 500M batch-16 step: ``to_mkldnn`` + ``_to_dense`` = 31% of CPU time). Measured on
the project CPU, one 1024→3072 projection: batch 16 fp32 4.0 ms vs 9.9 ms (MkldnnLinear) and 12.3 ms
(``F.linear``); bf16 2.6 ms vs 4.6 ms (``F.linear``). The dense weight is released after packing.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from hexamer.model.hugepages import gather_on_huge_pages, on_huge_pages
from hexamer.model.llama import MLP, LlamaModel, RMSNorm
from hexamer.model.lowbit import Int4Linear
from hexamer.model.native import NativeKernels, native_kernels, native_status
from hexamer.model.quant import Int8Linear

#: Batch-size hint for oneDNN's weight layout choice (decode batches); any batch size works.
PACK_BATCH_HINT = 16


def onednn_available() -> bool:
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


def _bf16_supported() -> bool:
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


class _RelaidLinear(nn.Module):
    """What both re-laid-out linears share: a dense view back for copies and state dicts."""

    in_features: int
    out_features: int
    bias: nn.Parameter | None

    @property
    def weight(self) -> torch.Tensor:
        raise NotImplementedError

    def dense(self) -> nn.Linear:
        """An equivalent plain ``nn.Linear``."""
        weight = self.weight
        lin = nn.Linear(self.in_features, self.out_features, bias=self.bias is not None).to(weight.dtype)
        with torch.no_grad():
            lin.weight.copy_(weight)
            if self.bias is not None:
                lin.bias.copy_(self.bias)
        return lin.requires_grad_(False)

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        destination[prefix + "weight"] = self.weight
        if self.bias is not None:
            destination[prefix + "bias"] = self.bias if keep_vars else self.bias.detach()


class PackedLinear(_RelaidLinear):
    """``nn.Linear`` with its weight in oneDNN's packed layout (float32, or bfloat16 on CPUs with
    native bf16). Same results as the dense layer up to summation order."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        weight = linear.weight.detach()
        self.packed = torch.ops.mkldnn._reorder_linear_weight(weight.contiguous(), PACK_BATCH_HINT)
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach(), requires_grad=False)

    @property
    def weight(self) -> torch.Tensor:
        """The dense weight (an unpacked copy; for inspection and state dicts, not the hot path)."""
        return self.packed.to_dense()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")

    def __deepcopy__(self, memo: dict) -> PackedLinear:  # oneDNN tensors have no storage to copy
        return PackedLinear(self.dense())

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, dtype={self.packed.dtype}"


class PanelLinear(_RelaidLinear):
    """``nn.Linear`` (float32 or bfloat16 weight) on hexamer's panel kernel. Inference only: the
    output has no autograd history. Same results as the dense layer up to summation order (fp32
    accumulation; activations are cast to the weight's dtype, the output rounded once)."""

    def __init__(self, linear: nn.Linear, kernels: NativeKernels) -> None:
        super().__init__()
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self._kernels = kernels
        self.register_buffer("panels", kernels.pack(linear.weight.detach()), persistent=False)
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach(), requires_grad=False)

    @property
    def weight(self) -> torch.Tensor:
        """The dense weight (an unpacked copy; for inspection and state dicts, not the hot path)."""
        return self._kernels.unpack(self.panels, self.out_features, self.in_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features)
        if rows.dtype != self.panels.dtype:
            rows = rows.to(self.panels.dtype)
        # bf16 in, bf16 out and no bias: the kernel rounds its fp32 sums itself (no cast op)
        direct = self.bias is None and x.dtype == self.panels.dtype
        y = self._kernels.linear(
            rows.contiguous(), self.panels, self.out_features, x.dtype if direct else torch.float32
        )
        if self.bias is not None:
            y += self.bias
        return y.to(x.dtype).view(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, dtype={self.panels.dtype}"


class PanelInt8Linear(nn.Module):
    """:class:`~hexamer.model.quant.Int8Linear` on hexamer's panel kernel: int8 panels widened in
    registers, fp32 sums, one multiply by the column's scale, one rounding to the activation
    dtype. The panels are laid out for one activation dtype (the model's); other activations are
    cast to it. Inference only. The state dict is the int8 one (``weight``, ``weight_scale``)."""

    def __init__(self, linear: Int8Linear, kernels: NativeKernels, activations: torch.dtype) -> None:
        super().__init__()
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self.activations = activations
        self._kernels = kernels
        self.register_buffer("panels", kernels.pack_int8(linear.weight, activations), persistent=False)
        # a plain attribute, not a buffer: Module.to(dtype) must not round the scales
        self.weight_scale = linear.weight_scale.float().contiguous()
        self.bias = linear.bias

    @property
    def weight(self) -> torch.Tensor:
        """The int8 codes [out, in] (an unpacked copy; for inspection and state dicts)."""
        return self._kernels.unpack_int8(self.panels, self.out_features, self.in_features, self.activations)

    def reference(self) -> Int8Linear:
        """The equivalent PyTorch :class:`Int8Linear`."""
        bias = None if self.bias is None else self.bias.detach()
        return Int8Linear(self.weight, self.weight_scale.clone(), bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features)
        if rows.dtype != self.activations:
            rows = rows.to(self.activations)
        direct = self.bias is None and x.dtype == self.activations
        y = self._kernels.linear_int8(
            rows.contiguous(), self.panels, self.weight_scale, self.out_features,
            x.dtype if direct else torch.float32,
        )  # fmt: skip
        if self.bias is not None:
            y += self.bias
        return y.to(x.dtype).view(*x.shape[:-1], self.out_features)

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        destination[prefix + "weight"] = self.weight
        destination[prefix + "weight_scale"] = self.weight_scale
        if self.bias is not None:
            destination[prefix + "bias"] = self.bias if keep_vars else self.bias.detach()

    def __deepcopy__(self, memo: dict) -> PanelInt8Linear:
        return PanelInt8Linear(self.reference(), self._kernels, self.activations)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, int8 per-channel, "
            f"activations={self.activations}"
        )


def float32_rows(x: torch.Tensor, width: int) -> torch.Tensor:
    """``x`` as contiguous float32 rows of ``width`` (the panel kernels' input), copied only when
    it is not already: at batch 1 a needless copy is a measurable share of a projection."""
    rows = x.reshape(-1, width)
    if rows.dtype != torch.float32 or not rows.is_contiguous():
        rows = rows.float().contiguous()
    return rows


class PanelLowbitLinear(nn.Module):
    """An :class:`~hexamer.model.lowbit.Int4Linear`, or an :class:`Int8Linear` with int8
    activations, on hexamer's integer dot-product kernel (``lowbit_gemm.c``: VNNI where the CPU has
    it). Each call rounds the input rows to int8 (float32 in, float32 sums), the results match the
    reference modules. Inference only; the state dict is the quantized one."""

    def __init__(self, linear: Int4Linear | Int8Linear, kernels: NativeKernels) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.bits = 4 if isinstance(linear, Int4Linear) else 8
        self._kernels = kernels
        if self.bits == 4:
            panels, extra = kernels.pack_w4(linear.weight, linear.weight_scale, self.in_features)
        else:
            panels, extra = kernels.pack_w8(linear.weight)
        self.register_buffer("panels", panels, persistent=False)
        self.register_buffer("extra", extra, persistent=False)  # int4: group scales; int8: column sums
        # a plain attribute, not a buffer: Module.to(dtype) must not round the scales
        self.column_scale = None if self.bits == 4 else linear.weight_scale.float().contiguous()
        self.bias = linear.bias
        #: The projections sharing this one's input, computed in one call (:class:`SharedInputInt4`).
        self.group: SharedInputInt4 | None = None

    def reference(self) -> Int4Linear | Int8Linear:
        """The equivalent PyTorch module."""
        bias = None if self.bias is None else self.bias.detach()
        if self.bits == 4:
            codes, scales = self._kernels.unpack_w4(
                self.panels, self.extra, self.out_features, self.in_features
            )
            return Int4Linear(codes, scales, self.in_features, bias)
        assert self.column_scale is not None
        ref = Int8Linear(
            self._kernels.unpack_w8(self.panels, self.out_features, self.in_features),
            self.column_scale.clone(),
            bias,
        )
        ref.quantize_activations = True
        return ref

    @property
    def weight(self) -> torch.Tensor:
        """The stored codes (int8 [out, in], or packed int4 [out, in/2]; an unpacked copy)."""
        return self.reference().weight

    @property
    def weight_scale(self) -> torch.Tensor:
        return self.reference().weight_scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.group is not None:
            y = self.group.take(self, x)
            if y is not None:
                return y
        rows = float32_rows(x, self.in_features)
        if self.bits == 4:  # the shapes were checked when packed: straight to the kernel
            m, n = rows.shape[0], self.out_features
            y = torch.empty(m, n, dtype=torch.float32)
            if self._kernels.lib.hx_linear_w4a8(
                self.panels.data_ptr(), self.extra.data_ptr(), rows.data_ptr(), y.data_ptr(), m, n,
                self.in_features, torch.get_num_threads(),
            ):  # fmt: skip
                raise MemoryError(f"no memory to quantize {m}x{self.in_features} activations")
        else:
            y = self._kernels.linear_w8a8(rows, self.panels, self.extra, self.column_scale, self.out_features)
        if self.bias is not None:
            y += self.bias
        if y.dtype != x.dtype:
            y = y.to(x.dtype)
        return y.view(*x.shape[:-1], self.out_features)

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        ref = self.reference()
        destination[prefix + "weight"] = ref.weight
        destination[prefix + "weight_scale"] = ref.weight_scale
        if self.bias is not None:
            destination[prefix + "bias"] = self.bias if keep_vars else self.bias.detach()

    def __deepcopy__(self, memo: dict) -> PanelLowbitLinear:
        return PanelLowbitLinear(self.reference(), self._kernels)

    def extra_repr(self) -> str:
        kind = "int4 groups of 32" if self.bits == 4 else "int8 per-channel"
        return f"in_features={self.in_features}, out_features={self.out_features}, {kind}, int8 activations"


class SharedInputInt4:
    """The int4 projections of one input (an attention layer's q/k/v) run as one kernel call.

    Why: at batch 1 each projection is a few tens of microseconds of weight streaming, so the
    per-call cost (Python, activation rounding, the thread team's start) is a large share; one
    call rounds the input once and keeps both threads streaming through all three weights.
    The first member called with an input computes every member's output; the others, called
    next with that same tensor (same object, unmodified), get theirs from the call. Any other
    order or input runs each member alone, with the same results. Decode-sized inputs only
    (at most :attr:`MAX_ROWS` rows): prefill is bound by arithmetic, not by calls."""

    MAX_ROWS = 64

    def __init__(self, members: list[PanelLowbitLinear]) -> None:
        self.members = members
        self._input: torch.Tensor | None = None
        self._version: int | None = -1
        self._pending: dict[int, torch.Tensor] = {}

    @staticmethod
    def applies(members: list[nn.Module]) -> bool:
        """Two or three bias-free int4 panel projections of the same input size."""
        return (
            2 <= len(members) <= 3
            and all(isinstance(m, PanelLowbitLinear) and m.bits == 4 and m.bias is None for m in members)
            and len({m.in_features for m in members}) == 1
        )

    def take(self, member: PanelLowbitLinear, x: torch.Tensor) -> torch.Tensor | None:
        """``member``'s output for ``x``, or None when it must run alone."""
        if x is self._input and _version(x) == self._version and id(member) in self._pending:
            out = self._pending.pop(id(member))
            if not self._pending:
                self._input = None
            return out
        k = member.in_features
        if member is not self.members[0] or x.numel() > self.MAX_ROWS * k or torch.is_grad_enabled():
            return None
        rows = float32_rows(x, k)
        weights = [(m.panels, m.extra, m.out_features) for m in self.members]
        y = member._kernels.linear_w4a8_multi(rows, weights)
        if y.dtype != x.dtype:
            y = y.to(x.dtype)
        outs = [o.view(*x.shape[:-1], o.shape[-1]) for o in y.split([w[2] for w in weights], dim=1)]
        self._input, self._version = x, _version(x)
        self._pending = {id(m): o for m, o in zip(self.members[1:], outs[1:], strict=True)}
        return outs[0]


def _version(x: torch.Tensor) -> int | None:
    """``x``'s in-place version counter (None for inference tensors, which keep none)."""
    return None if x.is_inference() else x._version


class PanelSwiGLU(MLP):
    """Llama's MLP whose gate and up projections are int4 panel projections: ``silu(gate(x)) *
    up(x)`` as one kernel call (``hx_swiglu_w4a8``: the input rounded to int8 once, the
    [M, 2 x FFN] intermediate never written), then ``down``. Anything else runs as
    :class:`~hexamer.model.llama.MLP`. The SwiGLU product is formed in float32 and rounded once
    to the activation dtype (the reference rounds gate and up to it first: the same in float32)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_proj, self.up_proj
        if torch.is_grad_enabled() or not SharedInputInt4.applies([gate, up]):
            return super().forward(x)
        assert isinstance(gate, PanelLowbitLinear) and isinstance(up, PanelLowbitLinear)
        rows = float32_rows(x, gate.in_features)
        h = gate._kernels.swiglu_w4a8(
            rows, (gate.panels, gate.extra), (up.panels, up.extra), gate.out_features
        )
        if h.dtype != x.dtype:
            h = h.to(x.dtype)
        return self.down_proj(h.view(*x.shape[:-1], gate.out_features))


def fuse_int4_projections(model: LlamaModel) -> int:
    """Group each attention layer's int4 q/k/v projections (:class:`SharedInputInt4`) and run each
    MLP's int4 gate/up as one SwiGLU call (:class:`PanelSwiGLU`), in place; returns how many
    layers were fused. Layers whose projections are not all int4 panel ones are left alone."""
    fused = 0
    for layer in model.layers:
        attn, mlp = layer.self_attn, layer.mlp
        members = [attn.q_proj, attn.k_proj, attn.v_proj]
        if SharedInputInt4.applies(members):
            group = SharedInputInt4(members)  # type: ignore[arg-type]
            for m in members:
                m.group = group
            fused += 1
        if type(mlp) is MLP and SharedInputInt4.applies([mlp.gate_proj, mlp.up_proj]):
            mlp.__class__ = PanelSwiGLU  # same state, same names: only forward changes
    return fused


class PanelHead:
    """Scores a contiguous block of LM-head rows (decoding's DNA block) on the panel kernel.

    The head's rows are packed on first use of each block, into a copy (the head is usually tied
    to the embedding, which must stay dense): 4,098 DNA rows x hidden, 8 MB in bf16 at the 500M
    shape. The copy is rebuilt when the head weight changes (its version counter moves) and kept
    for at most :attr:`MAX_BLOCKS` blocks; blocks larger than :attr:`MAX_ROWS` (the whole
    vocabulary, for text) stay on ``F.linear``. Results are rounded to the weight dtype before
    the float32 upcast, as ``F.linear`` in that dtype would be.
    """

    MAX_ROWS = 65_536
    MAX_BLOCKS = 4

    def __init__(self, kernels: NativeKernels) -> None:
        self._kernels = kernels
        self._packed: dict[tuple[int, int], tuple[Any, ...]] = {}

    def accepts(self, hidden: torch.Tensor, weight: torch.Tensor) -> bool:
        """The dtypes and device this head scores (the rest stays on ``F.linear``)."""
        return (
            hidden.dtype == weight.dtype
            and weight.device.type == "cpu"
            and weight.dtype in (torch.float32, torch.bfloat16)
        )

    def pack(self, block: torch.Tensor) -> tuple[Any, ...]:
        """The packed copy of one block of head rows."""
        return (self._kernels.pack(block),)

    def product(self, x: torch.Tensor, packed: tuple[Any, ...], n: int, weight: torch.Tensor) -> torch.Tensor:
        """``x`` times the packed block (``n`` rows), float32."""
        return self._kernels.linear(x, packed[0], n, weight.dtype).to(torch.float32)

    def __call__(self, hidden: torch.Tensor, weight: torch.Tensor, rows: slice) -> torch.Tensor | None:
        start, stop, step = rows.indices(weight.shape[0])
        n = stop - start
        if (
            step != 1
            or not 0 < n <= self.MAX_ROWS
            or torch.is_grad_enabled()
            or not self.accepts(hidden, weight)
        ):
            return None
        key, stamp = (start, stop), (weight.data_ptr(), weight._version)
        entry = self._packed.get(key)
        if entry is None or entry[:2] != stamp:
            if entry is None and len(self._packed) >= self.MAX_BLOCKS:
                self._packed.pop(next(iter(self._packed)))
            entry = self._packed[key] = (*stamp, *map(on_huge_pages, self.pack(weight[start:stop])))
        x = hidden.reshape(-1, hidden.shape[-1]).contiguous()
        return self.product(x, entry[2:], n, weight).view(*hidden.shape[:-1], n)

    def __deepcopy__(self, memo: dict) -> PanelHead:  # a copied model packs its own head
        return type(self)(self._kernels)


def _decoder_linears(model: LlamaModel) -> list[tuple[nn.Module, str, nn.Linear]]:
    return [
        (parent, name, child)
        for layer in model.layers
        for parent in (layer.self_attn, layer.mlp)
        for name, child in list(parent.named_children())
        if isinstance(child, nn.Linear)
    ]


def _native_kernels_for(model: LlamaModel) -> NativeKernels | None:
    """hexamer's kernels where they apply to ``model`` (float32/bfloat16 weights on the CPU) and
    build; ``None`` otherwise."""
    if model.device.type != "cpu" or model.dtype not in (torch.float32, torch.bfloat16):
        return None
    return native_kernels()


def _quantized_linears(model: LlamaModel) -> list[tuple[nn.Module, str, Int8Linear | Int4Linear]]:
    return [
        (parent, name, child)
        for layer in model.layers
        for parent in (layer.self_attn, layer.mlp)
        for name, child in list(parent.named_children())
        if isinstance(child, (Int8Linear, Int4Linear))
    ]


def use_native_linears(model: LlamaModel) -> int:
    """Swap every ``nn.Linear`` of the decoder layers for a :class:`PanelLinear` (and every
    :class:`~hexamer.model.quant.Int8Linear` for a :class:`PanelInt8Linear`, and every int4 or
    int8-activation one for a :class:`PanelLowbitLinear`), in place.

    Returns how many were converted: float32 and bfloat16 models on the CPU where the kernels
    build (:func:`hexamer.model.native.native_kernels`); 0 otherwise (the model is left alone).
    """
    kernels = _native_kernels_for(model)
    if kernels is None:
        return 0
    linears = _decoder_linears(model)
    for parent, name, child in linears:
        setattr(parent, name, PanelLinear(child, kernels))
    # (parent, name) only: each quantized weight is freed as soon as its panels exist, so packing
    # never holds two copies of the model's projections (an 8B int4 model must fit in 8 GiB)
    quantized = [(parent, name) for parent, name, _ in _quantized_linears(model)]
    for parent, name in quantized:
        child = getattr(parent, name)
        if isinstance(child, Int4Linear) or child.quantize_activations:
            setattr(parent, name, PanelLowbitLinear(child, kernels))
        else:
            setattr(parent, name, PanelInt8Linear(child, kernels, model.dtype))
        del child
    for layer in model.layers:  # each layer's weights on huge pages (hexamer.model.hugepages)
        gather_on_huge_pages(layer.modules())
    fuse_int4_projections(model)
    return len(linears) + len(quantized)


def use_native_attention(model: LlamaModel) -> int:
    """Run decode-shaped attention over the KV cache (at most
    :data:`~hexamer.model.llama.DECODE_KERNEL_MAX_TOKENS` new tokens per row) on hexamer's C kernel
    (``decode_attention.c``) instead of SDPA; prefill keeps SDPA. Returns how many layers were
    switched: all of a float32/bfloat16 CPU model where the kernels build, else 0.

    Why: SDPA costs ~85 us per layer per decode step at batch 1 whatever the cache length (plus
    q/k/v casts in bf16 models), and at batch 16 reads the cache well below the memory bandwidth.
    """
    kernels = _native_kernels_for(model)
    if kernels is None:
        return 0
    for layer in model.layers:
        layer.self_attn.decode_kernel = kernels.decode_attention
    return len(model.layers)


def use_native_norms(model: LlamaModel) -> int:
    """Run every RMSNorm (inference only) as one C call (``rms_norm.c``) instead of 6-8 PyTorch ops
    (~25 us per call at decode shapes, 57 calls per step at the 500M shape). Returns how many
    norms were switched: all of a float32/bfloat16 CPU model where the kernels build, else 0."""
    kernels = _native_kernels_for(model)
    if kernels is None:
        return 0
    norms = [m for m in model.modules() if isinstance(m, RMSNorm)]
    for norm in norms:
        norm.kernel = kernels.rms_norm
    return len(norms)


def use_native_head(model: LlamaModel) -> bool:
    """Score blocks of LM-head rows (decoding's DNA rows) on the panel kernel (:class:`PanelHead`):
    0.62 -> ~0.3 ms per bf16 decode step at the 500M shape. True where it was switched on."""
    kernels = _native_kernels_for(model)
    if kernels is None:
        return False
    model.head_kernel = PanelHead(kernels)
    return True


def use_cpu_linears(model: LlamaModel, *, native: bool | None = None, onednn: bool | None = None) -> str:
    """Put the decoder's linear layers on the fastest CPU kernels available; returns which
    (``"native"``, ``"onednn"`` or ``"torch"``). ``native=None``: hexamer's kernel where it builds,
    else oneDNN; ``native=True`` requires it (``RuntimeError`` with the reason otherwise);
    ``onednn=True`` picks oneDNN over the native kernel; ``False`` turns either off.

    With the native kernels the decode attention, norms and LM-head block move to C too
    (:func:`use_native_attention`, :func:`use_native_norms`, :func:`use_native_head`).

    Measured at the 500M shape (docs/benchmarks.md): the native projections make the decode step
    1.4x (fp32) / 1.55x (bf16) faster at batch 1 than oneDNN and equal at batch 16; the other
    native kernels take a further 16-21% off at batch 1 and 25-27% at batch 16. Prefill is equal
    in fp32 and ~12% slower in bf16 on CPUs with AVX512-BF16 (``onednn=True`` for prefill-only
    bf16 jobs)."""
    if native is True or (native is None and onednn is not True):
        if use_native_linears(model):
            use_native_attention(model)
            use_native_norms(model)
            use_native_head(model)
            return "native"
        if native is True and model.device.type == "cpu":
            why = native_status() if native_kernels() is None else f"not for {model.dtype} weights"
            raise RuntimeError(f"hexamer's native CPU kernels are {why} (float32 and bfloat16 only)")
    if onednn is not False and use_onednn_linears(model):
        return "onednn"
    return "torch"


def use_onednn_linears(model: LlamaModel) -> int:
    """Swap every ``nn.Linear`` of the decoder layers for a :class:`PackedLinear`, in place.

    Returns how many were converted. The embedding / LM head stay dense (decode reads only the
    DNA rows of the head, a view). Converted: float32 models on the CPU, and bfloat16 ones where
    oneDNN has native bf16 kernels (AVX512-BF16/AMX); anything else is left alone.
    """
    if model.device.type != "cpu" or not onednn_available():
        return 0
    if model.dtype != torch.float32 and not (model.dtype == torch.bfloat16 and _bf16_supported()):
        return 0
    linears = _decoder_linears(model)
    for parent, name, child in linears:
        setattr(parent, name, PackedLinear(child))
    return len(linears)
