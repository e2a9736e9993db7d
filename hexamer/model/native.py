"""Build and load hexamer's C kernels (``panel_gemm.c``, ``decode_attention.c``, ``rms_norm.c``) on first use.

Why compile on the user's machine: the kernel is a plain C file that the system C compiler builds
in about a second with ``-march=native``, so it uses whatever vector unit the CPU has (AVX-512,
AVX2, NEON) without shipping per-CPU binaries. The shared library is cached under
``$HEXAMER_CACHE/native`` (default ``~/.cache/hexamer/native``), keyed on the source, the compiler,
the flags and the CPU, written atomically, checked against PyTorch once after loading, and loaded
with :mod:`ctypes` (no Python headers, no PyTorch headers). Where anything is missing (no compiler,
no OpenMP, a failed check) :func:`native_kernels` returns ``None`` with the reason in
:func:`native_status`, and the model keeps PyTorch's oneDNN path. ``HEXAMER_NATIVE=0`` turns the
kernels off; ``HEXAMER_NATIVE_CFLAGS`` adds compiler flags (e.g. ``-mno-avx512bf16``).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import sysconfig
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from hexamer.cache import cache_root
from hexamer.model.native_check import self_check

log = logging.getLogger(__name__)

#: The C sources, compiled together into one library.
SOURCES = tuple(
    Path(__file__).with_name(name)
    for name in ("panel_gemm.c", "decode_attention.c", "rms_norm.c", "lowbit_gemm.c")
)
#: The header they share (part of the build key: a change to it must rebuild).
HEADERS = (Path(__file__).with_name("simd.h"),)
#: Output columns per weight panel (``PANEL`` in the C source).
PANEL = 32
FLAGS = ("-O3", "-march=native", "-fopenmp", "-ffp-contract=fast", "-shared", "-fPIC", "-std=gnu11")
_ABI_VERSION = 5
_status = "not used in this process"


@dataclass(frozen=True)
class NativeKernels:
    """Handles on the compiled library's entry points (see ``panel_gemm.c``)."""

    path: Path
    lib: ctypes.CDLL

    def __deepcopy__(self, memo: dict) -> NativeKernels:  # a loaded library is shared, not copied
        return self

    @property
    def bf16_dot(self) -> bool:
        """bf16 runs on the CPU's bf16 dot-product instructions (else it is widened to fp32)."""
        return bool(self.lib.hx_bf16_dot())

    def pack(self, weight: torch.Tensor) -> torch.Tensor:
        """``weight`` [N, K] (float32 or bfloat16) in the panel layout, as a flat tensor."""
        if weight.dtype not in (torch.float32, torch.bfloat16) or weight.dim() != 2:
            raise ValueError(f"cannot pack a {weight.dtype} tensor of shape {tuple(weight.shape)}")
        n, k = weight.shape
        weight = weight.detach().contiguous()
        bf16 = weight.dtype == torch.bfloat16
        panels = torch.empty(self.lib.hx_packed_size(n, k, int(bf16)), dtype=weight.dtype)
        fn = self.lib.hx_pack_bf16 if bf16 else self.lib.hx_pack_f32
        fn(weight.data_ptr(), panels.data_ptr(), n, k, torch.get_num_threads())
        return panels

    def unpack(self, panels: torch.Tensor, out_features: int, in_features: int) -> torch.Tensor:
        """The dense [out_features, in_features] weight back from :meth:`pack` (exact)."""
        weight = torch.empty(out_features, in_features, dtype=panels.dtype)
        fn = self.lib.hx_unpack_bf16 if panels.dtype == torch.bfloat16 else self.lib.hx_unpack_f32
        fn(panels.data_ptr(), weight.data_ptr(), out_features, in_features)
        return weight

    def linear(
        self, x: torch.Tensor, panels: torch.Tensor, out_features: int, out_dtype: torch.dtype = torch.float32
    ) -> torch.Tensor:
        """``x`` [M, K] (contiguous; float32 for float32 panels, bfloat16 for bfloat16 ones) times
        the packed weight: [M, out_features] in ``out_dtype`` (float32; or bfloat16 for bfloat16
        panels, each result rounded once from its fp32 sum, which saves a cast)."""
        m, k = x.shape
        if x.dtype != panels.dtype or not x.is_contiguous():
            raise ValueError(f"need contiguous {panels.dtype} activations, got {x.dtype}")
        if out_dtype not in (torch.float32, panels.dtype):
            allowed = " or ".join(sorted({str(torch.float32), str(panels.dtype)}))
            raise ValueError(
                f"output dtype {out_dtype} is not possible for {panels.dtype} panels ({allowed})"
            )
        y = torch.empty(m, out_features, dtype=out_dtype)
        threads = torch.get_num_threads()
        if panels.dtype == torch.float32:
            self.lib.hx_linear_f32(panels.data_ptr(), x.data_ptr(), y.data_ptr(), m, out_features, k, threads)
        elif self.lib.hx_linear_bf16(
            panels.data_ptr(),
            x.data_ptr(),
            y.data_ptr(),
            m,
            out_features,
            k,
            threads,
            int(out_dtype != torch.float32),
        ):
            raise MemoryError(f"no memory to widen {m}x{k} bf16 activations")
        return y

    def pack_int8(self, weight: torch.Tensor, activations: torch.dtype) -> torch.Tensor:
        """int8 ``weight`` [N, K] in the panel layout for ``activations`` (float32 or bfloat16:
        bf16 activations on a CPU with a bf16 dot product get k-pair panels), as a flat tensor."""
        if weight.dtype != torch.int8 or weight.dim() != 2:
            raise ValueError(f"cannot pack a {weight.dtype} tensor of shape {tuple(weight.shape)} as int8")
        if activations not in (torch.float32, torch.bfloat16):
            raise ValueError(f"int8 panels meet float32 or bfloat16 activations, not {activations}")
        n, k = weight.shape
        weight = weight.detach().contiguous()
        x_bf16 = int(activations == torch.bfloat16)
        panels = torch.empty(self.lib.hx_packed_size_i8(n, k, x_bf16), dtype=torch.int8)
        self.lib.hx_pack_i8(weight.data_ptr(), panels.data_ptr(), n, k, x_bf16, torch.get_num_threads())
        return panels

    def unpack_int8(
        self, panels: torch.Tensor, out_features: int, in_features: int, activations: torch.dtype
    ) -> torch.Tensor:
        """The dense int8 [out_features, in_features] weight back from :meth:`pack_int8` (exact)."""
        weight = torch.empty(out_features, in_features, dtype=torch.int8)
        self.lib.hx_unpack_i8(
            panels.data_ptr(),
            weight.data_ptr(),
            out_features,
            in_features,
            int(activations == torch.bfloat16),
        )
        return weight

    def linear_int8(
        self,
        x: torch.Tensor,
        panels: torch.Tensor,
        scales: torch.Tensor,
        out_features: int,
        out_dtype: torch.dtype = torch.float32,
    ) -> torch.Tensor:
        """``x`` [M, K] (contiguous float32 or bfloat16, the dtype the panels were packed for by
        :meth:`pack_int8`) times the int8 weight, each output column times its float32 scale:
        [M, out_features] in ``out_dtype`` (float32, or bfloat16 for bfloat16 activations, each
        result rounded once)."""
        m, k = x.shape
        if x.dtype not in (torch.float32, torch.bfloat16) or not x.is_contiguous():
            raise ValueError(f"need contiguous float32 or bfloat16 activations, got {x.dtype}")
        if panels.dtype != torch.int8 or panels.numel() != self.lib.hx_packed_size_i8(
            out_features, k, int(x.dtype == torch.bfloat16)
        ):
            raise ValueError(
                f"int8 panels do not hold a [{out_features}, {k}] weight for {x.dtype} activations"
            )
        if scales.dtype != torch.float32 or scales.shape != (out_features,) or not scales.is_contiguous():
            raise ValueError(
                f"need {out_features} contiguous float32 scales, got {tuple(scales.shape)} {scales.dtype}"
            )
        if out_dtype not in (torch.float32, x.dtype):
            raise ValueError(f"output dtype {out_dtype} is not possible for {x.dtype} activations")
        y = torch.empty(m, out_features, dtype=out_dtype)
        if self.lib.hx_linear_i8(
            panels.data_ptr(), scales.data_ptr(), x.data_ptr(), y.data_ptr(), m, out_features, k,
            torch.get_num_threads(), int(x.dtype == torch.bfloat16), int(out_dtype == torch.bfloat16),
        ):  # fmt: skip
            raise MemoryError(f"no memory to widen {m}x{k} bf16 activations")
        return y

    @property
    def vnni(self) -> bool:
        """int8 dot products run on AVX-512 VNNI (else on plain C loops, same results)."""
        return bool(self.lib.hx_vnni())

    def pack_w8(self, weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """int8 ``weight`` [N, K] as (panels for :meth:`linear_w8a8`, int32 column sums per 32 inputs)."""
        if weight.dtype != torch.int8 or weight.dim() != 2:
            raise ValueError(f"cannot pack a {weight.dtype} tensor of shape {tuple(weight.shape)} as int8")
        n, k = weight.shape
        weight = weight.detach().contiguous()
        panels = torch.empty(self.lib.hx_packed_size_w8(n, k), dtype=torch.int8)
        sums = torch.empty(self.lib.hx_packed_sums_w8(n, k), dtype=torch.int32)
        self.lib.hx_pack_w8(
            weight.data_ptr(), panels.data_ptr(), sums.data_ptr(), n, k, torch.get_num_threads()
        )
        return panels, sums

    def unpack_w8(self, panels: torch.Tensor, out_features: int, in_features: int) -> torch.Tensor:
        weight = torch.empty(out_features, in_features, dtype=torch.int8)
        self.lib.hx_unpack_w8(panels.data_ptr(), weight.data_ptr(), out_features, in_features)
        return weight

    def pack_w4(
        self, codes: torch.Tensor, scales: torch.Tensor, in_features: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Packed int4 ``codes`` uint8 [N, Kp/2] and float16 ``scales`` [N, Kp/32] (the format of
        :mod:`hexamer.model.lowbit`) as (panels, panel-ordered scales) for :meth:`linear_w4a8`."""
        n, k = codes.shape[0], in_features
        panels = torch.empty(self.lib.hx_packed_size_w4(n, k), dtype=torch.uint8)
        pscales = torch.empty(self.lib.hx_packed_scales_w4(n, k), dtype=torch.float16)
        self.lib.hx_pack_w4(
            codes.contiguous().data_ptr(), scales.contiguous().data_ptr(), panels.data_ptr(),
            pscales.data_ptr(), n, k, torch.get_num_threads(),
        )  # fmt: skip
        return panels, pscales

    def unpack_w4(
        self, panels: torch.Tensor, pscales: torch.Tensor, out_features: int, in_features: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The (codes, scales) back from :meth:`pack_w4` (exact)."""
        kp = -(-in_features // 32) * 32
        codes = torch.empty(out_features, kp // 2, dtype=torch.uint8)
        scales = torch.empty(out_features, kp // 32, dtype=torch.float16)
        self.lib.hx_unpack_w4(
            panels.data_ptr(),
            pscales.data_ptr(),
            codes.data_ptr(),
            scales.data_ptr(),
            out_features,
            in_features,
        )
        return codes, scales

    def linear_w8a8(
        self,
        x: torch.Tensor,
        panels: torch.Tensor,
        sums: torch.Tensor,
        scales: torch.Tensor,
        out_features: int,
    ) -> torch.Tensor:
        """float32 ``x`` [M, K], rounded to int8 per 32 inputs, times the int8 weight of :meth:`pack_w8`
        with its float32 column ``scales``: float32 [M, out_features]."""
        k = x.shape[-1]
        if panels.numel() != self.lib.hx_packed_size_w8(out_features, k) or scales.shape != (out_features,):
            raise ValueError(f"int8 panels do not hold a [{out_features}, {k}] weight")
        return self._lowbit_call(self.lib.hx_linear_w8a8, x, out_features, panels, sums, scales.float())

    def linear_w4a8(
        self, x: torch.Tensor, panels: torch.Tensor, pscales: torch.Tensor, out_features: int
    ) -> torch.Tensor:
        """float32 ``x`` [M, K], rounded to int8 per 32 inputs, times the int4 weight of :meth:`pack_w4`:
        float32 [M, out_features]."""
        k = x.shape[-1]
        if panels.numel() != self.lib.hx_packed_size_w4(out_features, k):
            raise ValueError(f"int4 panels do not hold a [{out_features}, {k}] weight")
        return self._lowbit_call(self.lib.hx_linear_w4a8, x, out_features, panels, pscales)

    def linear_w4a8_multi(
        self, x: torch.Tensor, weights: Sequence[tuple[torch.Tensor, torch.Tensor, int]]
    ) -> torch.Tensor:
        """:meth:`linear_w4a8` of two or three int4 weights (``(panels, pscales, out_features)``
        each) on the same ``x`` [M, K] in one call (q/k/v): their outputs side by side, float32
        [M, sum of out_features]. The activations are quantized once and both threads stream
        every weight."""
        if not 2 <= len(weights) <= 3:
            raise ValueError(f"linear_w4a8_multi takes 2 or 3 weights, got {len(weights)}")
        x = _float_rows(x)
        m, k = x.shape
        args: list[int] = []
        for panels, pscales, n in weights:
            _check_w4(self.lib, panels, pscales, n, k)
            args += [panels.data_ptr(), pscales.data_ptr(), n]
        args += [0, 0, 0] * (3 - len(weights))
        y = torch.empty(m, sum(w[2] for w in weights), dtype=torch.float32)
        if self.lib.hx_linear_w4a8_multi(*args, x.data_ptr(), y.data_ptr(), m, k, torch.get_num_threads()):
            raise MemoryError(f"no memory to quantize {m}x{k} activations")
        return y

    def swiglu_w4a8(
        self,
        x: torch.Tensor,
        gate: tuple[torch.Tensor, torch.Tensor],
        up: tuple[torch.Tensor, torch.Tensor],
        out_features: int,
    ) -> torch.Tensor:
        """``silu(x @ G^T) * (x @ U^T)`` for int4 ``gate`` and ``up`` weights (``(panels, pscales)``
        of :meth:`pack_w4`, both [out_features, K]) in one call: float32 [M, out_features]."""
        x = _float_rows(x)
        m, k = x.shape
        for panels, pscales in (gate, up):
            _check_w4(self.lib, panels, pscales, out_features, k)
        y = torch.empty(m, out_features, dtype=torch.float32)
        if self.lib.hx_swiglu_w4a8(
            gate[0].data_ptr(), gate[1].data_ptr(), up[0].data_ptr(), up[1].data_ptr(),
            x.data_ptr(), y.data_ptr(), m, out_features, k, torch.get_num_threads(),
        ):  # fmt: skip
            raise MemoryError(f"no memory to quantize {m}x{k} activations")
        return y

    @staticmethod
    def _lowbit_call(
        fn: ctypes._CFuncPtr, x: torch.Tensor, out_features: int, *weights: torch.Tensor
    ) -> torch.Tensor:
        m, k = _float_rows(x).shape
        y = torch.empty(m, out_features, dtype=torch.float32)
        ptrs = [w.contiguous().data_ptr() for w in weights]
        if fn(*ptrs, x.data_ptr(), y.data_ptr(), m, out_features, k, torch.get_num_threads()):
            raise MemoryError(f"no memory to quantize {m}x{k} activations")
        return y

    def rms_norm(self, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        """Llama's RMSNorm of ``x`` (..., N) with ``weight`` (N,), both float32 or both bfloat16,
        rounded as the reference rounds (see ``rms_norm.c``)."""
        n = x.shape[-1]
        if x.dtype not in (torch.float32, torch.bfloat16) or weight.dtype != x.dtype or weight.shape != (n,):
            raise ValueError(f"rms_norm takes float32/bfloat16 x and a ({n},) weight of its dtype")
        x = x.contiguous()
        out = torch.empty_like(x)
        self.lib.hx_rms_norm(
            x.data_ptr(), weight.contiguous().data_ptr(), out.data_ptr(), x.numel() // max(n, 1), n, eps,
            int(x.dtype == torch.bfloat16), torch.get_num_threads(),
        )  # fmt: skip
        return out

    def decode_attention(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        cos: torch.Tensor | None,
        sin: torch.Tensor | None,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        slots: torch.Tensor,
        mask: torch.Tensor,
        *,
        rows: torch.Tensor | None = None,
        scale: float,
        block_table: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """One layer's attention for a decode-shaped forward, cache write included.

        ``q`` (B, T, H, D) and the new ``k``/``v`` (B, T, G, D) come straight from the
        projections (any strides with a contiguous last dim); ``cos``/``sin`` (B, T, D) rotate q
        and k (``None``: already rotated). The rotated keys and the values are written into
        ``k_cache``/``v_cache`` (rows, G, slots, D), float32 or bfloat16, at ``slots`` (B, T) of
        cache row ``rows[b]`` (default ``b``); then every new token attends over the first ``S``
        slots of its row under ``mask``, bool (B, 1, T, S). With a ``block_table`` (cache rows,
        n) int64 the caches are block pools (G, blocks, block size, D), block size a power of two,
        and slot ``s`` of row ``r`` lives in block ``block_table[r, s // block size]`` (a paged
        cache, :class:`hexamer.model.KVCache`). Activations are all float32 or all bfloat16. Returns
        (B, T, H * D) in that dtype, the layout the output projection takes."""
        b, t, h, d = q.shape
        g, s = k.shape[2], mask.shape[-1]
        act, supported = q.dtype, (torch.float32, torch.bfloat16)
        tables = [] if cos is None or sin is None else [cos, sin]
        if act not in supported or any(x.dtype != act for x in (k, v, *tables)):
            raise ValueError(
                f"decode attention takes float32 or bfloat16 activations of one dtype, got q {act}"
            )
        if k_cache.dtype not in supported or v_cache.dtype != k_cache.dtype:
            raise ValueError(f"decode attention takes a float32 or bfloat16 cache, got {k_cache.dtype}")
        if k.shape != (b, t, g, d) or v.shape != k.shape or k.stride() != v.stride():
            raise ValueError(f"new keys/values must both be {(b, t, g, d)} with equal strides")
        if any(x.stride(-1) != 1 for x in (q, k)) or not (
            k_cache.is_contiguous() and v_cache.is_contiguous()
        ):
            raise ValueError("decode attention needs a contiguous head dim and contiguous caches")
        paged = block_table is not None
        heads = 0 if paged else 1  # paged pools are head-major: (G, blocks, block size, D)
        if k_cache.shape != v_cache.shape or k_cache.shape[heads] != g or k_cache.shape[3] != d:
            raise ValueError(f"caches {tuple(k_cache.shape)} do not hold {g} KV heads of dim {d}")
        bs = k_cache.shape[2]
        row_stride, head_stride = k_cache.stride(1 - heads), k_cache.stride(heads)
        if paged and (bs & (bs - 1) or block_table.dtype != torch.int64 or block_table.stride(-1) != 1):
            raise ValueError("a block table must be int64 with contiguous rows over power-of-two blocks")
        room = block_table.shape[1] * bs if paged else bs
        if mask.dtype != torch.bool or mask.shape != (b, 1, t, s) or mask.stride(-1) != 1 or s > room:
            raise ValueError(f"mask must be bool (B, 1, T, S<=slots) = {(b, 1, t)}, got {tuple(mask.shape)}")
        slots = slots.to(torch.int64).expand(b, t).contiguous()
        if rows is not None:
            rows = rows.to(torch.int64).contiguous()
        if tables:
            cos, sin = (x.expand(b, t, d).contiguous() for x in tables)
        out = torch.empty(b, t, h * d, dtype=act)
        code = self.lib.hx_decode_attention(
            q.data_ptr(), q.stride(0), q.stride(1), q.stride(2),
            k.data_ptr(), v.data_ptr(), k.stride(0), k.stride(1), k.stride(2),
            cos.data_ptr() if tables else None, sin.data_ptr() if tables else None,
            slots.data_ptr(), int(act == torch.bfloat16),
            k_cache.data_ptr(), v_cache.data_ptr(), row_stride, head_stride, k_cache.stride(2),
            int(k_cache.dtype == torch.bfloat16), None if rows is None else rows.data_ptr(),
            block_table.data_ptr() if paged else None, block_table.stride(0) if paged else 0,
            bs.bit_length() - 1 if paged else 0, mask.data_ptr(), mask.stride(0), mask.stride(2), out.data_ptr(),
            b, t, h, g, d, s, scale, torch.get_num_threads(),
        )  # fmt: skip
        if code == -1:
            raise MemoryError("no memory for decode-attention scratch")
        if code:
            raise ValueError(f"decode attention does not take {h} query heads over {g} KV heads")
        return out


def _float_rows(x: torch.Tensor) -> torch.Tensor:
    if x.dtype != torch.float32 or not x.is_contiguous() or x.dim() != 2:
        raise ValueError(f"need contiguous float32 [M, K] activations, got {x.dtype} {tuple(x.shape)}")
    return x


def _check_w4(lib: ctypes.CDLL, panels: torch.Tensor, pscales: torch.Tensor, n: int, k: int) -> None:
    """Panels and scales of :meth:`NativeKernels.pack_w4` for an [n, k] weight, contiguous."""
    if (
        panels.dtype != torch.uint8
        or panels.numel() != lib.hx_packed_size_w4(n, k)
        or pscales.dtype != torch.float16
        or pscales.numel() != lib.hx_packed_scales_w4(n, k)
        or not (panels.is_contiguous() and pscales.is_contiguous())
    ):
        raise ValueError(f"int4 panels do not hold a [{n}, {k}] weight")


def native_status() -> str:
    """Why the kernels are (not) in use, for logs and ``hexamer bench`` headers."""
    return _status


def native_disabled() -> bool:
    return os.environ.get("HEXAMER_NATIVE", "1").strip().lower() in ("0", "false", "no", "off")


@functools.cache
def native_kernels() -> NativeKernels | None:
    """The compiled kernels, built on first call; ``None`` (reason in :func:`native_status`)
    where they cannot be built or do not pass the self-check."""
    global _status
    if native_disabled():
        _status = "disabled by HEXAMER_NATIVE=0"
        return None
    try:
        path = _build()
        kernels = _load(path)
        self_check(kernels)
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        _status = f"not available ({exc}); using PyTorch's kernels"
        log.info("hexamer native kernels %s", _status)
        return None
    _status = f"loaded from {path}"
    return kernels


def c_compiler() -> str:
    """The C compiler hexamer's kernels are built with (``$CC``, Python's own, or ``cc``)."""
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    exe = cc.split()[0]
    if shutil.which(exe) is None:
        raise RuntimeError(f"no C compiler ({exe!r} not found; set CC)")
    return cc


def cpu_signature() -> str:
    """What -march=native depends on: the machine and, on Linux, the CPU model and flags."""
    parts = [platform.machine(), platform.system()]
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.split(":")[0].strip() in ("model name", "flags", "Features", "CPU part"):
                parts.append(line)
                if line.startswith(("flags", "Features")):
                    break
    except OSError:
        parts.append(platform.processor())
    return "\n".join(parts)


def build_library(
    stem: str,
    sources: Sequence[Path],
    flags: Sequence[str],
    headers: Sequence[Path] = (),
    libs: Sequence[str] = (),
) -> Path:
    """Compile ``sources`` into a shared library cached as ``<cache>/native/<stem>-<key>``; the key
    covers the sources and headers, the compiler and its version, the flags (with
    ``$HEXAMER_NATIVE_CFLAGS``) and the CPU, so any change rebuilds. Written atomically."""
    cc = c_compiler()
    all_flags = [*flags, *os.environ.get("HEXAMER_NATIVE_CFLAGS", "").split()]
    version = subprocess.run(
        [*cc.split(), "--version"], capture_output=True, text=True, timeout=60, check=False
    ).stdout
    text = "\0".join(
        [
            *(src.read_text() for src in (*sources, *headers)),
            cc,
            version,
            " ".join(all_flags),
            cpu_signature(),
        ]
    )
    key = hashlib.sha256(text.encode()).hexdigest()[:16]
    target = cache_root() / "native" / f"{stem}-{key}{sysconfig.get_config_var('SHLIB_SUFFIX') or '.so'}"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".build-", suffix=target.suffix)
    os.close(fd)
    try:
        done = subprocess.run(
            [*cc.split(), *all_flags, *map(str, sources), "-o", tmp, *libs],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            first = (done.stderr.strip().splitlines() or ["(no output)"])[0]
            raise RuntimeError(f"{cc} failed to compile {', '.join(src.name for src in sources)}: {first}")
        os.replace(tmp, target)  # atomic: a concurrent builder either sees nothing or all of it
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def _build() -> Path:
    return build_library("panel_gemm", SOURCES, FLAGS, HEADERS)


def _load(path: Path) -> NativeKernels:
    lib = ctypes.CDLL(str(path))
    if lib.hx_abi_version() != _ABI_VERSION:
        raise RuntimeError(f"{path} has ABI {lib.hx_abi_version()}, expected {_ABI_VERSION}")
    ptr, i64, c_int = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
    for name in ("hx_pack_f32", "hx_pack_bf16"):
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = [ptr, ptr, i64, i64, c_int], None
    for name in ("hx_unpack_f32", "hx_unpack_bf16"):
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = [ptr, ptr, i64, i64], None
    lib.hx_linear_f32.argtypes, lib.hx_linear_f32.restype = [ptr, ptr, ptr, i64, i64, i64, c_int], None
    lib.hx_linear_bf16.argtypes, lib.hx_linear_bf16.restype = (
        [ptr, ptr, ptr, i64, i64, i64, c_int, c_int],
        c_int,
    )
    lib.hx_packed_size.argtypes, lib.hx_packed_size.restype = [i64, i64, c_int], i64
    lib.hx_packed_size_i8.argtypes, lib.hx_packed_size_i8.restype = [i64, i64, c_int], i64
    lib.hx_pack_i8.argtypes, lib.hx_pack_i8.restype = [ptr, ptr, i64, i64, c_int, c_int], None
    lib.hx_unpack_i8.argtypes, lib.hx_unpack_i8.restype = [ptr, ptr, i64, i64, c_int], None
    lib.hx_linear_i8.argtypes = [ptr, ptr, ptr, ptr, i64, i64, i64, c_int, c_int, c_int]
    lib.hx_linear_i8.restype = c_int
    lib.hx_bf16_dot.restype = c_int
    lib.hx_decode_attention.argtypes = [
        ptr,
        i64,
        i64,
        i64,  # q and its strides
        ptr,
        ptr,
        i64,
        i64,
        i64,  # new k, v and their strides
        ptr,
        ptr,
        ptr,
        c_int,  # cos, sin, slots, bf16 activations
        ptr,
        ptr,
        i64,
        i64,
        i64,
        c_int,  # k and v caches, their strides, bf16 cache
        ptr,
        ptr,
        i64,
        c_int,  # rows, block table, its row stride, log2 block size
        ptr,
        i64,
        i64,
        ptr,  # mask, mask strides, out
        i64,
        i64,
        i64,
        i64,
        i64,
        i64,
        ctypes.c_float,
        c_int,  # B T H G D S, scale, threads
    ]
    lib.hx_decode_attention.restype = c_int
    lib.hx_rms_norm.argtypes = [ptr, ptr, ptr, i64, i64, ctypes.c_float, c_int, c_int]
    lib.hx_rms_norm.restype = None
    lib.hx_vnni.restype = c_int
    for name in ("hx_packed_size_w8", "hx_packed_sums_w8", "hx_packed_size_w4", "hx_packed_scales_w4"):
        getattr(lib, name).argtypes, getattr(lib, name).restype = [i64, i64], i64
    lib.hx_pack_w8.argtypes, lib.hx_pack_w8.restype = [ptr, ptr, ptr, i64, i64, c_int], None
    lib.hx_unpack_w8.argtypes, lib.hx_unpack_w8.restype = [ptr, ptr, i64, i64], None
    lib.hx_pack_w4.argtypes, lib.hx_pack_w4.restype = [ptr, ptr, ptr, ptr, i64, i64, c_int], None
    lib.hx_unpack_w4.argtypes, lib.hx_unpack_w4.restype = [ptr, ptr, ptr, ptr, i64, i64], None
    lib.hx_linear_w8a8.argtypes = [ptr, ptr, ptr, ptr, ptr, i64, i64, i64, c_int]
    lib.hx_linear_w4a8.argtypes = [ptr, ptr, ptr, ptr, i64, i64, i64, c_int]
    lib.hx_linear_w8a8.restype = lib.hx_linear_w4a8.restype = c_int
    lib.hx_linear_w4a8_multi.argtypes = [ptr, ptr, i64] * 3 + [ptr, ptr, i64, i64, c_int]
    lib.hx_swiglu_w4a8.argtypes = [ptr, ptr, ptr, ptr, ptr, ptr, i64, i64, i64, c_int]
    lib.hx_linear_w4a8_multi.restype = lib.hx_swiglu_w4a8.restype = c_int
    return NativeKernels(path=path, lib=lib)
