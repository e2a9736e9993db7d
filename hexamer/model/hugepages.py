"""Packed weights in memory advised for transparent huge pages.

Why: a batch-1 decode step streams every packed weight once, and with 4 KiB pages the hardware
prefetcher stops at every page boundary and each page costs a TLB entry. Linux backs anonymous
memory with 2 MiB pages only where it was advised (``madvise(MADV_HUGEPAGE)``) on systems set to
``madvise`` (the common default), and PyTorch's allocator does not advise. Measured on the
project's AMD EPYC (2 threads, 500M shape, int4): a decode step of 8.2 ms with 4 KiB pages, 6.4 ms
with huge pages (docs/benchmarks.md). Copies are made once, when weights are packed; where the
system has no huge pages (or ``HEXAMER_HUGE_PAGES=0``) the tensor is returned unchanged.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterable

import torch
from torch import nn

from hexamer.model.train_heap import release_free_memory

#: One transparent huge page (x86-64 and most arm64 kernels); smaller tensors are left alone.
HUGE_PAGE = 2 << 20


def huge_pages_enabled() -> bool:
    """Whether packed weights are copied into huge-page-advised memory here."""
    return os.environ.get("HEXAMER_HUGE_PAGES", "1") != "0" and hasattr(mmap, "MADV_HUGEPAGE")


def on_huge_pages(t: torch.Tensor) -> torch.Tensor:
    """A copy of the contiguous CPU tensor ``t`` in anonymous memory advised for huge pages and
    aligned to one, or ``t`` itself where that does not apply (small, not contiguous, not on the
    CPU, or the advice refused). The copy keeps its memory alive on its own."""
    nbytes = t.numel() * t.element_size()
    if nbytes < HUGE_PAGE or t.device.type != "cpu" or not t.is_contiguous() or not huge_pages_enabled():
        return t
    whole = _advised_bytes(nbytes)
    if whole is None:
        return t
    out = whole[:nbytes].view(t.dtype).view(t.shape)
    out.copy_(t)
    out.requires_grad_(t.requires_grad)
    return out


def gather_on_huge_pages(modules: Iterable[nn.Module], names: tuple[str, ...] = ("panels", "extra")) -> int:
    """Move the buffers called ``names`` of ``modules`` (contiguous, on the CPU) into one
    huge-page-advised mapping, each at a 64-byte boundary, and return the bytes moved (0 where
    nothing was: too small in all, or huge pages unavailable). Why one mapping: a 500M-shape
    int4 projection is 0.25-1.5 MB, under one huge page on its own, but a decoder layer's are
    about 7 MB together. Call it per layer, so that at most one layer is held twice."""
    items = [
        (module, name, buf)
        for module in modules
        for name, buf in module.named_buffers(recurse=False)
        if name in names and buf.device.type == "cpu" and buf.is_contiguous() and buf.numel()
    ]
    sizes = [-(-buf.numel() * buf.element_size() // 64) * 64 for _, _, buf in items]
    if sum(sizes) < HUGE_PAGE or not huge_pages_enabled():
        return 0
    whole = _advised_bytes(sum(sizes))
    if whole is None:
        return 0
    offset = 0
    for (module, name, buf), size in zip(items, sizes, strict=True):
        view = whole[offset : offset + buf.numel() * buf.element_size()].view(buf.dtype).view(buf.shape)
        view.copy_(buf)
        setattr(module, name, view)  # a registered buffer: replaced in place, same name
        offset += size
    del items, buf  # (items is not empty here) the last references to the originals
    release_free_memory()  # the originals' pages, freed mid-heap, go back now: one layer held twice
    return offset


def _advised_bytes(nbytes: int) -> torch.Tensor | None:
    """``nbytes`` uint8 of fresh anonymous memory advised for huge pages, starting on one; None
    where the system refuses."""
    try:
        # private: a shared anonymous mapping is shmem, which these pages do not back
        region = mmap.mmap(-1, nbytes + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        region.madvise(mmap.MADV_HUGEPAGE)  # before the first touch, so the faults take huge pages
    except (OSError, ValueError):
        return None
    whole = torch.frombuffer(region, dtype=torch.uint8)  # holds a reference to the mapping
    start = -whole.data_ptr() % HUGE_PAGE
    return whole[start : start + nbytes]
