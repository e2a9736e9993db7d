"""pad_rows: one padded batch from ragged token rows."""

from __future__ import annotations

import pytest
import torch

from hexamer.model import pad_rows


def test_right_padding_and_mask() -> None:
    b = pad_rows([[1, 2, 3], [4]], pad_id=0)
    assert b.ids.tolist() == [[1, 2, 3], [4, 0, 0]]
    assert b.mask is not None and b.mask.tolist() == [[True, True, True], [True, False, False]]
    assert b.last_index().tolist() == [2, 0]
    assert b.width == 3 and b.lengths == [3, 1]


def test_left_padding() -> None:
    b = pad_rows([[1, 2, 3], [4]], pad_id=9, side="left")
    assert b.ids.tolist() == [[1, 2, 3], [9, 9, 4]]
    assert b.mask is not None and b.mask.tolist() == [[True, True, True], [False, False, True]]
    assert b.last_index().tolist() == [2, 2]


def test_full_rows_need_no_mask() -> None:
    b = pad_rows([[1, 2], [3, 4]], pad_id=0)
    assert b.mask is None and b.mask_on("cpu") is None
    assert torch.equal(b.ids_on("cpu"), torch.tensor([[1, 2], [3, 4]]))


def test_bad_side() -> None:
    with pytest.raises(ValueError, match="side"):
        pad_rows([[1]], 0, side="middle")  # type: ignore[arg-type]
