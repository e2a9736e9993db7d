import copy
import io
import re
from pathlib import Path

import pytest
import torch

from hexamer.model.hugepages import HUGE_PAGE, huge_pages_enabled, on_huge_pages

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def _mapping_of(address: int) -> dict[str, str]:
    """The /proc/self/smaps fields of the mapping that holds ``address``."""
    fields: dict[str, str] = {}
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = re.match(r"^([0-9a-f]+)-([0-9a-f]+) ", line)
        if head:
            inside = int(head.group(1), 16) <= address < int(head.group(2), 16)
        elif inside and ":" in line:
            key, value = line.split(":", 1)
            fields[key] = value.strip()
    return fields


def test_a_large_tensor_is_copied_exactly_onto_an_aligned_mapping() -> None:
    t = torch.randn(1100, 1000)
    h = on_huge_pages(t)
    if not huge_pages_enabled():
        pytest.skip("no MADV_HUGEPAGE here")
    assert h is not t and torch.equal(h, t) and h.dtype == t.dtype and h.shape == t.shape
    assert h.data_ptr() % HUGE_PAGE == 0
    assert torch.equal(copy.deepcopy(h), t)  # a copy is an ordinary tensor with the same values
    buf = io.BytesIO()
    torch.save(h, buf)
    buf.seek(0)
    assert torch.equal(torch.load(buf), t)
    del t
    h.add_(0)  # the mapping lives as long as the tensor does


def test_small_strided_or_switched_off_tensors_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    small = torch.randn(100)
    assert on_huge_pages(small) is small
    strided = torch.randn(2000, 1000).t()
    assert on_huge_pages(strided) is strided
    monkeypatch.setenv("HEXAMER_HUGE_PAGES", "0")
    big = torch.randn(1000, 1000)
    assert not huge_pages_enabled() and on_huge_pages(big) is big


@pytest.mark.skipif(not THP.is_file() or "[never]" in THP.read_text(), reason="no transparent huge pages")
def test_the_copy_is_eligible_for_transparent_huge_pages() -> None:
    if not huge_pages_enabled():
        pytest.skip("no MADV_HUGEPAGE here")
    h = on_huge_pages(torch.ones(4 * HUGE_PAGE // 4))
    fields = _mapping_of(h.data_ptr())
    assert fields.get("THPeligible") == "1"


def test_gather_moves_each_modules_buffers_into_one_mapping_and_trims(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import hexamer.model.hugepages as hugepages

    if not huge_pages_enabled():
        pytest.skip("no MADV_HUGEPAGE here")
    trimmed = []
    monkeypatch.setattr(hugepages, "release_free_memory", lambda: trimmed.append(1) or True)
    mods = [torch.nn.Module() for _ in range(3)]
    originals = []
    for i, m in enumerate(mods):
        m.register_buffer("panels", torch.randn(300_000 + i), persistent=False)
        m.register_buffer("extra", torch.randn(7).half(), persistent=False)
        m.register_buffer("other", torch.randn(5), persistent=False)
        originals.append((m.panels.clone(), m.extra.clone(), m.other))
    moved = hugepages.gather_on_huge_pages(mods)
    assert moved >= sum(m.panels.numel() * 4 + 14 for m in mods) and trimmed == [1]
    base = mods[0].panels.data_ptr()
    assert base % HUGE_PAGE == 0
    for m, (panels, extra, other) in zip(mods, originals, strict=True):
        assert (
            torch.equal(m.panels, panels) and torch.equal(m.extra, extra) and m.extra.dtype == torch.float16
        )
        assert m.other is other  # buffers with other names stay
        assert m.panels.data_ptr() % 64 == 0 and base <= m.panels.data_ptr() < base + moved
    small = torch.nn.Module()
    small.register_buffer("panels", torch.randn(10), persistent=False)
    assert hugepages.gather_on_huge_pages([small]) == 0
