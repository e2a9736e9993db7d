import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.stats import pearsonr
from sklearn.metrics import log_loss, mean_squared_error

from hexamer.finetune.losses import check_loss, compute_loss, default_loss, outputs_of
from hexamer.finetune.task import TaskSpec

REG = TaskSpec("regression", ("a", "b"))
gen = torch.Generator().manual_seed(0)
PRED = torch.randn(16, 2, generator=gen, dtype=torch.float64)
TRUE = torch.randn(16, 2, generator=gen, dtype=torch.float64)
W = torch.rand(16, generator=gen, dtype=torch.float64) + 0.1


def test_mse_with_row_weights_equals_sklearn():
    ours = compute_loss("mse", PRED, TRUE, weights=W)
    peer = mean_squared_error(TRUE.numpy(), PRED.numpy(), sample_weight=W.numpy())
    assert float(ours) == pytest.approx(peer, rel=1e-12)


def test_huber_and_pearson_huber():
    peer = torch.nn.HuberLoss(delta=0.5)(PRED, TRUE)
    assert float(compute_loss("huber", PRED, TRUE, huber_delta=0.5)) == pytest.approx(float(peer), rel=1e-12)
    r = np.mean([pearsonr(PRED[:, j].numpy(), TRUE[:, j].numpy())[0] for j in range(2)])
    ours = compute_loss("pearson_huber", PRED, TRUE, huber_delta=0.5, pearson_lambda=0.3)
    assert float(ours) == pytest.approx(1 - r + 0.3 * float(peer), rel=1e-10)


def test_cross_entropy_with_class_weights_equals_torch_and_sklearn():
    logits = torch.randn(12, 3, generator=gen, dtype=torch.float64)
    y = torch.tensor([0, 1, 2, 2, 1, 0, 0, 2, 1, 1, 0, 2])
    cw = torch.tensor([1.0, 2.0, 0.5], dtype=torch.float64)
    peer = F.cross_entropy(logits, y, weight=cw)
    assert float(compute_loss("ce", logits, y, class_weights=cw)) == pytest.approx(float(peer), rel=1e-12)
    probs = logits.softmax(-1).numpy()
    assert float(compute_loss("ce", logits, y)) == pytest.approx(log_loss(y.numpy(), probs), rel=1e-9)


def test_bce_with_positive_weights_equals_torch():
    logits = torch.randn(10, 3, generator=gen, dtype=torch.float64)
    y = (torch.rand(10, 3, generator=gen) > 0.5).double()
    pw = torch.tensor([1.0, 3.0, 0.5], dtype=torch.float64)
    peer = torch.nn.BCEWithLogitsLoss(pos_weight=pw)(logits, y)
    assert float(compute_loss("bce", logits, y, class_weights=pw)) == pytest.approx(float(peer), rel=1e-12)


def test_loss_must_fit_the_task():
    assert default_loss(REG) == "mse"
    assert default_loss(TaskSpec("binary", ("y",))) == "ce"
    assert default_loss(TaskSpec("multilabel", ("a", "b"))) == "bce"
    with pytest.raises(ValueError, match="regression"):
        check_loss("ce", REG)
    with pytest.raises(ValueError, match="one of"):
        check_loss("l1", REG)


def test_outputs_are_probabilities_for_classes():
    logits = torch.randn(4, 3, generator=gen)
    probs = outputs_of(TaskSpec("multiclass", ("y",), ("a", "b", "c")), logits)
    torch.testing.assert_close(probs.sum(-1), torch.ones(4))
    assert torch.equal(outputs_of(REG, logits), logits)
