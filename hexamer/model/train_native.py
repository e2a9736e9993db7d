"""Build and load the fused training kernels of ``train_fused.c`` on first use.

The same scheme as the inference kernels (:mod:`hexamer.model.native`): the system C compiler
builds one small library with ``-march=native`` and OpenMP, cached under
``$HEXAMER_CACHE/native`` keyed on the source, compiler, flags and CPU, written atomically and
loaded with :mod:`ctypes`. A separate library because training and inference kernels change for
different reasons. Where it cannot be built (no compiler, no OpenMP) :func:`train_native_kernels`
returns ``None`` with the reason in :func:`train_native_status`, and training keeps the PyTorch
formulas of :mod:`hexamer.model.train_ops` (the same maths). ``HEXAMER_NATIVE=0`` turns it off too.

Every entry point takes contiguous CPU tensors (float32; bfloat16 where said); the callers check that.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import torch

from hexamer.model.native import build_library

__all__ = ["TrainKernels", "train_native_kernels", "train_native_status"]

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("train_fused.c")
FLAGS = (
    "-O3", "-march=native", "-fopenmp", "-ffp-contract=fast", "-fno-math-errno",
    "-shared", "-fPIC", "-std=gnu11",
)  # fmt: skip
_ABI_VERSION = 2
_status = "not used in this process"


def _ptr(t: torch.Tensor | None) -> int | None:
    return None if t is None else t.data_ptr()


@dataclass(frozen=True)
class TrainKernels:
    """Handles on ``train_fused.c``; arguments are contiguous CPU tensors of the dtypes each names."""

    path: Path
    lib: ctypes.CDLL

    def __deepcopy__(self, memo: dict) -> TrainKernels:  # a loaded library is shared, not copied
        return self

    def rms_forward(
        self, x: torch.Tensor, weight: torch.Tensor, eps: float
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(y, rstd)`` of RMSNorm over the last dimension of ``x`` (rows ``(M, N)``)."""
        n = x.shape[-1]
        y = torch.empty_like(x)
        rstd = torch.empty(x.numel() // max(n, 1), dtype=torch.float32)
        self.lib.hx_rms_fwd(
            x.data_ptr(), weight.data_ptr(), y.data_ptr(), rstd.data_ptr(), rstd.numel(), n, eps,
            torch.get_num_threads(),
        )  # fmt: skip
        return y, rstd

    def rms_backward(
        self, grad: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor, want_weight: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(grad of x, grad of weight or None)``."""
        n = x.shape[-1]
        gx = torch.empty_like(x)
        gw = torch.zeros(n, dtype=torch.float32) if want_weight else None
        failed = self.lib.hx_rms_bwd(
            grad.data_ptr(), x.data_ptr(), weight.data_ptr(), rstd.data_ptr(), gx.data_ptr(), _ptr(gw),
            rstd.numel(), n, torch.get_num_threads(),
        )  # fmt: skip
        if failed:
            raise MemoryError("no memory for the RMSNorm weight gradient's partial sums")
        return gx, gw

    def rope(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, transpose: bool, out_dtype: torch.dtype
    ) -> torch.Tensor:
        """The rotation of ``x`` ``(B, T, H, D)`` by float32 tables ``(B, T, D)`` into ``out_dtype``
        (its transpose: the backward). float32 to float32; a bfloat16 ``x`` into float32 (as
        ``x * cos`` promotes under autocast); with ``transpose``, float32 into bfloat16 too
        (the gradient of that bfloat16 ``x``)."""
        b, t, h, d = x.shape
        y = torch.empty(x.shape, dtype=out_dtype)
        args = (x.data_ptr(), cos.data_ptr(), sin.data_ptr(), y.data_ptr(), b * t, h, d)
        if x.dtype == torch.bfloat16 and not transpose:
            self.lib.hx_rope_bf16(*args, torch.get_num_threads())
        elif transpose and out_dtype == torch.bfloat16:
            self.lib.hx_rope_t_bf16(*args, torch.get_num_threads())
        else:
            self.lib.hx_rope(*args, int(transpose), torch.get_num_threads())
        return y

    def swiglu_forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """``silu(a) * b`` for float32 or bfloat16 ``a`` and ``b`` (bf16: rounded as autocast's two ops)."""
        y = torch.empty_like(a)
        fn = self.lib.hx_swiglu_fwd_bf16 if a.dtype == torch.bfloat16 else self.lib.hx_swiglu_fwd
        fn(a.data_ptr(), b.data_ptr(), y.data_ptr(), a.numel(), torch.get_num_threads())
        return y

    def swiglu_backward(
        self, grad: torch.Tensor, a: torch.Tensor, b: torch.Tensor, want_a: bool, want_b: bool
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        # both gradients in one allocation: two fresh ones of this size each step made glibc map
        # and fault in new pages for the second every call (1.8 ms against 27 ms at 656 x 3072)
        both = torch.empty((int(want_a) + int(want_b), *a.shape), dtype=a.dtype)
        ga = both[0] if want_a else None
        gb = both[-1] if want_b else None
        fn = self.lib.hx_swiglu_bwd_bf16 if a.dtype == torch.bfloat16 else self.lib.hx_swiglu_bwd
        fn(
            grad.data_ptr(),
            a.data_ptr(),
            b.data_ptr(),
            _ptr(ga),
            _ptr(gb),
            a.numel(),
            torch.get_num_threads(),
        )
        return ga, gb


def train_native_status() -> str:
    """Why the training kernels are (not) in use, for logs and benchmark notes."""
    return _status


@functools.cache
def train_native_kernels() -> TrainKernels | None:
    """The compiled training kernels, built on first call; ``None`` (reason in
    :func:`train_native_status`) where they cannot be built."""
    global _status
    if os.environ.get("HEXAMER_NATIVE", "1").strip().lower() in ("0", "false", "no", "off"):
        _status = "disabled by HEXAMER_NATIVE=0"
        return None
    try:
        kernels = _load(_build())
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        _status = f"not available ({exc}); using PyTorch's ops"
        log.info("hexamer training kernels %s", _status)
        return None
    _status = f"loaded from {kernels.path}"
    return kernels


def _build() -> Path:
    return build_library("train_fused", (SOURCE,), FLAGS, libs=("-lm",))


def _load(path: Path) -> TrainKernels:
    lib = ctypes.CDLL(str(path))
    if lib.hx_train_abi_version() != _ABI_VERSION:
        raise RuntimeError(f"{path} has ABI {lib.hx_train_abi_version()}, expected {_ABI_VERSION}")
    ptr, i64, c_int, f32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_float
    lib.hx_rms_fwd.argtypes, lib.hx_rms_fwd.restype = [ptr, ptr, ptr, ptr, i64, i64, f32, c_int], None
    lib.hx_rms_bwd.argtypes, lib.hx_rms_bwd.restype = [ptr, ptr, ptr, ptr, ptr, ptr, i64, i64, c_int], c_int
    lib.hx_rope.argtypes, lib.hx_rope.restype = [ptr, ptr, ptr, ptr, i64, i64, i64, c_int, c_int], None
    for name in ("hx_rope_bf16", "hx_rope_t_bf16"):
        getattr(lib, name).argtypes = [ptr, ptr, ptr, ptr, i64, i64, i64, c_int]
        getattr(lib, name).restype = None
    for name in ("hx_swiglu_fwd", "hx_swiglu_fwd_bf16"):
        getattr(lib, name).argtypes, getattr(lib, name).restype = [ptr, ptr, ptr, i64, c_int], None
    for name in ("hx_swiglu_bwd", "hx_swiglu_bwd_bf16"):
        getattr(lib, name).argtypes, getattr(lib, name).restype = [ptr, ptr, ptr, ptr, ptr, i64, c_int], None
    return TrainKernels(path, lib)
