"""Give back the resident pages of a checkpoint file that no tensor of the model reads any more.

Weights are read from safetensors files mapped into memory: a tensor stored in the dtype it is
loaded in is a view of the mapping, not a copy. When the CPU fast path re-lays the decoder's linear
weights out into its own panels (:func:`hexamer.model.cpu.use_cpu_linears`), the dense views are
dropped, but the pages they were read through stay resident in the mapping as long as any other
tensor (the embedding) keeps the file open: at the 500M shape 1.3 GB of the 2.05 GB file, counted
in the process's RSS on top of the panels (an idle ``hexamer serve`` held weights + 1.9 GB).

:func:`release_file_pages` asks the kernel to reclaim those pages (``MADV_PAGEOUT``). That never
changes what the memory reads: a clean page of a file mapping is read back from the file if it is
touched again, and a page the process wrote to (anonymous after copy-on-write) stays where it is
when there is no swap, or is swapped out. Pages that a live tensor of the model still reads are
left alone, so nothing the model uses pays a fault later.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Iterable
from pathlib import Path

import torch
from torch import nn

__all__ = ["release_file_pages"]

#: madvise advice (Linux 5.4+): reclaim these pages now
_MADV_PAGEOUT = 21
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _madvise() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    name = ctypes.util.find_library("c")
    try:
        fn = ctypes.CDLL(name, use_errno=True).madvise if name else None
    except (OSError, AttributeError):
        return None
    if fn is not None:
        fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        fn.restype = ctypes.c_int
    return fn


def _file_mappings(files: set[str], maps: str = "/proc/self/maps") -> list[tuple[int, int]]:
    """(start, end) of this process's mappings of ``files`` (resolved paths)."""
    spans = []
    try:
        with open(maps, encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.split(maxsplit=5)
                if len(parts) == 6 and parts[5].strip() in files:
                    start, end = (int(x, 16) for x in parts[0].split("-"))
                    spans.append((start, end))
    except OSError:  # not Linux
        return []
    return spans


def _live_ranges(model: nn.Module) -> list[tuple[int, int]]:
    """(start, end) byte ranges the tensors the model's modules hold read (parameters, buffers and
    plain tensor attributes; negative strides do not occur in weights), sorted."""
    seen: set[int] = set()
    ranges = []
    for module in model.modules():
        tensors = [*module.parameters(recurse=False), *module.buffers(recurse=False)]
        tensors += [v for v in vars(module).values() if isinstance(v, torch.Tensor)]
        for t in tensors:
            if t.device.type != "cpu" or t.layout != torch.strided or id(t) in seen or not t.numel():
                continue
            seen.add(id(t))
            extent = 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True) if n)
            ranges.append((t.data_ptr(), t.data_ptr() + extent * t.element_size()))
    return sorted(ranges)


def _gaps(span: tuple[int, int], live: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The whole pages of ``span`` that no ``live`` range touches."""
    out = []
    pos = span[0]
    for start, end in live:
        if end <= pos or start >= span[1]:
            continue
        if start > pos:
            out.append((pos, start))
        pos = max(pos, end)
    if pos < span[1]:
        out.append((pos, span[1]))
    pages = []
    for a, b in out:
        a, b = -(-a // _PAGE) * _PAGE, b // _PAGE * _PAGE
        if b > a:
            pages.append((a, b))
    return pages


def release_file_pages(model: nn.Module, files: Iterable[str | Path]) -> int:
    """Ask the kernel to reclaim the pages of this process's mappings of ``files`` (the model's
    checkpoint shards) that no tensor of ``model`` reads; returns the bytes asked for (0 where this
    is not Linux, or nothing is mapped). What the memory reads never changes (module docstring)."""
    madvise = _madvise()
    paths = {str(Path(f).resolve()) for f in files}
    spans = _file_mappings(paths) if madvise is not None else []
    if not spans:
        return 0
    live = _live_ranges(model)
    asked = 0
    for span in spans:
        for a, b in _gaps(span, live):
            if madvise(a, b - a, _MADV_PAGEOUT) == 0:  # EINVAL on kernels before 5.4: nothing done
                asked += b - a
    return asked
