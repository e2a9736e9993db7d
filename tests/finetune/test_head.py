from pathlib import Path

import pytest
import torch

from hexamer.finetune.folders import new_classifier
from hexamer.finetune.head import HeadSettings
from hexamer.finetune.task import TaskSpec

TASK = TaskSpec("regression", ("a", "b"))


@pytest.mark.parametrize("pooling", ["last", "mean"])
@pytest.mark.parametrize("layer", [-1, 1])
def test_right_padded_rows_run_without_the_padding_mask(tiny_folder: Path, dna, pooling: str, layer: int):
    """Right padding: the backbone runs causal attention without the dense padding mask, and the
    pooled features equal those of a forward that applies the mask (every real position is the same)."""
    model = new_classifier(tiny_folder, HeadSettings(TASK, pooling=pooling, layer=layer), seed=0)
    rows = model.encode(dna)
    assert not rows.mask.all()  # a ragged batch: real padding
    seen = []
    plain = model.backbone.forward

    def spy(ids, *args, **kwargs):
        seen.append(kwargs.get("attention_mask"))
        return plain(ids, *args, **kwargs)

    with torch.no_grad():
        ours = model.features(rows.ids, rows.mask)
        model.backbone.forward = spy
        model.features(rows.ids, rows.mask)
        out = plain(rows.ids, attention_mask=rows.mask, logits_at="none", return_layer_hidden=True)
    assert seen == [None]
    hidden = out.layer_hidden[model.layer]
    lengths = rows.mask.sum(-1)
    if pooling == "last":
        want = hidden[torch.arange(len(dna)), lengths - 1]
    else:
        cols = torch.arange(rows.ids.shape[1])[None, :]
        content = ((cols >= 1) & (cols < lengths[:, None] - 1)).float()
        want = (hidden * content[..., None]).sum(1) / content.sum(1, keepdim=True)
    torch.testing.assert_close(ours, want, atol=1e-5, rtol=1e-5)


def test_left_padding_keeps_the_mask(tiny_folder: Path):
    model = new_classifier(tiny_folder, HeadSettings(TASK), seed=0)
    seen = []
    plain = model.backbone.forward

    def spy(ids, *args, **kwargs):
        seen.append(kwargs.get("attention_mask"))
        return plain(ids, *args, **kwargs)

    model.backbone.forward = spy
    ids = torch.full((2, 5), model.pad_token_id)
    mask = torch.tensor([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]], dtype=torch.bool)
    with torch.no_grad():
        model.features(ids, mask)
    assert seen[0] is mask
