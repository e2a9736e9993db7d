import numpy as np
import pytest

from hexamer.finetune.task import LabelledSet, TaskSpec


def test_num_labels_and_problem_type():
    reg = TaskSpec("regression", ("dev", "hk"))
    assert (reg.num_labels, reg.problem_type) == (2, "regression")
    assert reg.id2label() == {0: "dev", 1: "hk"}
    binary = TaskSpec("binary", ("label",))
    assert (binary.num_labels, binary.problem_type) == (2, "single_label_classification")
    assert binary.id2label() == {0: "0", 1: "1"}
    multi = TaskSpec("multiclass", ("y",), ("a", "b", "c"))
    assert multi.num_labels == 3 and multi.id2label()[2] == "c"
    ml = TaskSpec("multilabel", ("x", "y", "z"))
    assert (ml.num_labels, ml.problem_type) == (3, "multi_label_classification")


@pytest.mark.parametrize(
    "args",
    [
        ("ordinal", ("y",)),
        ("regression", ()),
        ("regression", ("y", "y")),
        ("binary", ("a", "b")),
        ("binary", ("y",), ("a", "b", "c")),
        ("multiclass", ("y",)),
        ("multiclass", ("y",), ("a",)),
        ("multilabel", ("a", "b"), ("x",)),
        ("regression", ("y",), ("a",)),
    ],
)
def test_bad_specs_raise(args):
    with pytest.raises(ValueError):
        TaskSpec(*args)


def test_json_round_trip():
    for spec in (
        TaskSpec("regression", ("a",)),
        TaskSpec("binary", ("y",), ("neg", "pos")),
        TaskSpec("multiclass", ("y",), ("a", "b", "c")),
    ):
        assert TaskSpec.from_json(spec.to_json()) == spec
    with pytest.raises(ValueError, match="lacks"):
        TaskSpec.from_json({"kind": "binary"})


def test_check_labels():
    TaskSpec("binary", ("y",)).check_labels(np.array([0, 1], dtype=np.int64))
    with pytest.raises(ValueError, match="class index"):
        TaskSpec("binary", ("y",)).check_labels(np.array([0, 2], dtype=np.int64))
    with pytest.raises(ValueError, match="float32"):
        TaskSpec("regression", ("a",)).check_labels(np.zeros(3, dtype=np.float32))
    with pytest.raises(ValueError, match="NaN"):
        TaskSpec("regression", ("a",)).check_labels(np.array([[np.nan]], dtype=np.float32))
    with pytest.raises(ValueError, match="0/1"):
        TaskSpec("multilabel", ("a",)).check_labels(np.array([[0.5]], dtype=np.float32))


def test_labelled_set_subset_and_checks():
    s = LabelledSet(
        ids=("a", "b", "c"),
        sequences=("AC", "GT", "NN"),
        labels=np.arange(3, dtype=np.float32)[:, None],
        weights=np.ones(3, dtype=np.float32),
        chroms=("chr1", "chr2", "chr1"),
        metric_mask=np.array([True, False, True]),
    )
    assert len(s) == 3
    sub = s.subset(np.array([2, 0]))
    assert sub.ids == ("c", "a") and sub.chroms == ("chr1", "chr1")
    assert sub.labels[:, 0].tolist() == [2.0, 0.0] and sub.metric_mask.tolist() == [True, True]
    masked = s.subset(np.array([False, True, False]))
    assert masked.sequences == ("GT",)
    with pytest.raises(ValueError, match="must match"):
        LabelledSet(("a",), ("A", "C"), np.zeros((2, 1), np.float32))
    with pytest.raises(ValueError, match="weights"):
        LabelledSet(("a",), ("A",), np.zeros((1, 1), np.float32), weights=np.ones(1))
    with pytest.raises(IndexError):
        s.subset(np.array([3]))
