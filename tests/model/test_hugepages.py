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
