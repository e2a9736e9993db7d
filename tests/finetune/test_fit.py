from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from hexamer.finetune.fit import fit
from hexamer.finetune.folders import load_classifier, weight_files
from hexamer.finetune.options import FitOptions, LoraOptions
from hexamer.finetune.predict import predict
from hexamer.finetune.task import LabelledSet, TaskSpec
from hexamer.io import reverse_complement
from tests.finetune.conftest import gc_set, pearson_metric

REG = TaskSpec("regression", ("gc",))
DEMO = Path(__file__).resolve().parents[2] / "hexamer" / "data" / "demo-model"


class Interrupt(Exception):
    pass


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    """Every tensor of a head folder (one file, or a probe's shards: backbone links + score)."""
    return {k: v for f in weight_files(folder) for k, v in load_file(str(f)).items()}


def test_full_fine_tuning_learns_gc_content(tiny_folder: Path, tmp_path: Path):
    train, valid = gc_set(96, 30, seed=0), gc_set(48, 30, seed=1)
    options = FitOptions(
        method="full",
        epochs=3,
        batch_size=16,
        lr=3e-3,
        head_lr=3e-3,
        warmup=0.1,
        shift_augment=False,
        pooling="last",
    )
    result = fit(tiny_folder, train, valid, REG, options, tmp_path / "run", metric=pearson_metric)
    r = pearson_metric(valid.labels, predict(result.best_folder, valid.sequences))
    assert r > 0.3, r
    assert r == pytest.approx(result.best_score, abs=1e-5)
    assert [h["step"] for h in result.history] == [6, 12, 18]


def test_probe_learns_on_the_demo_model(tmp_path: Path):
    train, valid = gc_set(48, 30, seed=0), gc_set(32, 30, seed=1)
    ridge = FitOptions(method="probe", pooling="mean", probe_ridge=1.0)
    result = fit(DEMO, train, valid, REG, ridge, tmp_path / "ridge", metric=pearson_metric)
    assert result.best_score > 0.7, result.best_score
    trained = FitOptions(method="probe", pooling="mean", epochs=15, batch_size=16, lr=0.03, warmup=0.0)
    result = fit(DEMO, train, valid, REG, trained, tmp_path / "sgd", metric=pearson_metric)
    assert result.best_score > 0.7, result.best_score
    # the folder holds the best evaluation's head (kept in memory, written at the end)
    assert pearson_metric(valid.labels, predict(result.best_folder, valid.sequences)) == pytest.approx(
        result.best_score, abs=1e-5
    )
    assert result.best_step < result.steps or result.history[-1]["best"]
    # the backbone is untouched: only the head differs from the base model
    saved = _weights(result.best_folder)
    base = load_file(str(DEMO / "model.safetensors"))
    name = "model.layers.0.self_attn.q_proj.weight"
    torch.testing.assert_close(saved[name].float(), base[name].float())


def test_lora_learns_on_the_demo_model(tmp_path: Path):
    train, valid = gc_set(48, 30, seed=0), gc_set(32, 30, seed=1)
    options = FitOptions(
        method="lora", epochs=2, batch_size=16, lr=5e-3, warmup=0.0, lora=LoraOptions(rank=4)
    )
    result = fit(DEMO, train, valid, REG, options, tmp_path / "run", metric=pearson_metric)
    assert result.best_score > 0.7, result.best_score
    assert (result.adapter_folder / "adapter_config.json").is_file()
    r = pearson_metric(valid.labels, predict(result.best_folder, valid.sequences))  # the merged export
    assert r == pytest.approx(result.best_score, abs=1e-4)


@pytest.mark.parametrize(
    "method, extra",
    [
        ("full", {"grad_accum": 2, "rc_augment": True, "shift_augment": True}),
        ("lora", {"lora": LoraOptions(rank=2, dropout=0.1)}),
    ],
)
def test_resume_ends_on_the_same_weights(tiny_folder: Path, tmp_path: Path, method, extra):
    train = gc_set(20, 24, seed=3)
    options = FitOptions(method=method, steps=6, batch_size=4, lr=1e-3, checkpoint_every=2, **extra)
    straight = fit(tiny_folder, train, None, REG, options, tmp_path / "straight")

    def stop_at_4(progress):
        if progress.step == 4:
            raise Interrupt

    with pytest.raises(Interrupt):
        fit(tiny_folder, train, None, REG, options, tmp_path / "resumed", on_progress=stop_at_4)
    with pytest.raises(ValueError, match="resume=True"):
        fit(tiny_folder, train, None, REG, options, tmp_path / "resumed")
    other = FitOptions(method=method, steps=7, batch_size=4, lr=1e-3, checkpoint_every=2, **extra)
    with pytest.raises(ValueError, match="other options"):
        fit(tiny_folder, train, None, REG, other, tmp_path / "resumed", resume=True)
    steps = []
    resumed = fit(
        tiny_folder, train, None, REG, options, tmp_path / "resumed", resume=True,
        on_progress=lambda p: steps.append(p.step),
    )  # fmt: skip
    assert steps == [5, 6] and resumed.steps == straight.steps == 6
    a, b = _weights(straight.best_folder), _weights(resumed.best_folder)
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name
    start = load_file(str(tiny_folder / "model.safetensors"))
    assert not torch.equal(a["model.norm.weight"], start["model.norm.weight"]) or method == "lora"


@pytest.mark.parametrize("method", ["full", "lora"])
def test_gradient_checkpointing_gives_the_same_step(tiny_folder: Path, tmp_path: Path, method):
    train = gc_set(8, 24, seed=4)
    runs = []
    for checkpointing in (False, True):
        options = FitOptions(method=method, steps=2, batch_size=4, lr=1e-3, grad_checkpointing=checkpointing)
        runs.append(
            _weights(fit(tiny_folder, train, None, REG, options, tmp_path / str(checkpointing)).best_folder)
        )
    for name in runs[0]:
        torch.testing.assert_close(runs[0][name], runs[1][name], atol=1e-6, rtol=1e-5)


def test_early_stopping_and_progress(tiny_folder: Path, tmp_path: Path):
    train, valid = gc_set(8, 24, seed=5), gc_set(4, 24, seed=6)
    seen = []
    options = FitOptions(
        steps=10, batch_size=4, lr=1e-3, eval_every=1, patience=2, schedule="plateau", plateau_patience=1
    )
    result = fit(
        tiny_folder, train, valid, REG, options, tmp_path / "run",
        metric=lambda y, p: 0.0, on_progress=seen.append,
    )  # fmt: skip
    assert result.stopped_early and result.steps == 3 and result.best_step == 1
    assert [p.step for p in seen] == [1, 2, 3] and seen[0].best and not seen[1].best
    assert seen[2].lr == pytest.approx(seen[1].lr * 0.5)  # plateau halved the rate after one bad evaluation


def test_classification_with_class_weights_and_bf16(tiny_folder: Path, tmp_path: Path):
    base = gc_set(12, 24, seed=7)
    task = TaskSpec("binary", ("high_gc",), ("low", "high"))
    labels = (base.labels[:, 0] > 0).astype(np.int64)
    data = LabelledSet(base.ids, base.sequences, labels)
    options = FitOptions(steps=2, batch_size=4, lr=1e-3, class_weights=(1.0, 2.0), bf16=True)
    result = fit(tiny_folder, data, data, task, options, tmp_path / "run")
    probs = predict(result.best_folder, data.sequences)
    assert probs.shape == (12, 2) and np.allclose(probs.sum(1), 1, atol=1e-5)
    assert load_classifier(result.best_folder).task == task


def test_rc_average_is_the_mean_of_both_strands(tiny_folder: Path, tmp_path: Path):
    data = gc_set(6, 30, seed=8)
    result = fit(
        tiny_folder, data, None, REG, FitOptions(steps=1, batch_size=6, rc_average=True), tmp_path / "r"
    )
    model = load_classifier(result.best_folder)
    assert model.settings.rc_average
    fwd = predict(model, data.sequences, rc_average=False)
    rev = predict(model, [reverse_complement(s) for s in data.sequences], rc_average=False)
    np.testing.assert_allclose(predict(model, data.sequences), (fwd + rev) / 2, atol=1e-6)


def test_bad_inputs_fail_before_the_model_loads(tmp_path: Path):
    data = gc_set(4, 12, seed=9)
    missing = tmp_path / "no-such-model"
    with pytest.raises(ValueError, match="binary task takes int64"):
        fit(missing, data, None, TaskSpec("binary", ("y",)), FitOptions(), tmp_path / "a")
    with pytest.raises(ValueError, match="trains with"):
        fit(missing, data, None, REG, FitOptions(loss="ce"), tmp_path / "b")
    with pytest.raises(ValueError, match="class_weights"):
        fit(missing, data, None, REG, FitOptions(class_weights=(1.0,)), tmp_path / "c")
    with pytest.raises(ValueError, match="batch_size >= 2"):
        fit(missing, data, None, REG, FitOptions(loss="pearson_huber", batch_size=1), tmp_path / "d")


def test_over_long_and_empty_sequences_are_named_before_the_load(tiny_folder: Path, tmp_path: Path):
    data = gc_set(3, 12, seed=10)
    long = LabelledSet(data.ids, (data.sequences[0], "A" * 6 * 2047, data.sequences[2]), data.labels)
    with pytest.raises(ValueError, match=r"training row 'row1' .* needs 2049 tokens"):
        fit(tiny_folder, long, None, REG, FitOptions(), tmp_path / "a")
    with pytest.raises(ValueError, match="layer 5 is out of range"):
        fit(tiny_folder, data, None, REG, FitOptions(layer=5), tmp_path / "c")
    empty = LabelledSet(data.ids, ("", *data.sequences[1:]), data.labels)
    with pytest.raises(ValueError, match="validation row 'row0' is empty"):
        fit(tiny_folder, data, empty, REG, FitOptions(), tmp_path / "b")


def test_a_lora_run_reads_the_same_in_transformers_and_peft(tiny_folder: Path, tmp_path: Path):
    transformers = pytest.importorskip("transformers")
    peft = pytest.importorskip("peft")
    data = gc_set(8, 30, seed=11)
    options = FitOptions(
        method="lora", steps=3, batch_size=4, lr=1e-2, pooling="last",  # what transformers computes
        lora=LoraOptions(rank=2, targets=("q_proj", "up_proj")),
    )  # fmt: skip
    result = fit(tiny_folder, data, None, REG, options, tmp_path / "run")
    model = load_classifier(result.best_folder)
    rows = model.encode(list(data.sequences))
    with torch.no_grad():
        ours = model(rows.ids, rows.mask)
        merged = transformers.AutoModelForSequenceClassification.from_pretrained(result.best_folder)
        mask = rows.mask.long() if rows.mask is not None else None
        torch.testing.assert_close(
            merged(input_ids=rows.ids, attention_mask=mask).logits, ours, atol=1e-4, rtol=0
        )
        base = transformers.LlamaForSequenceClassification.from_pretrained(tiny_folder, num_labels=1)
        adapted = peft.PeftModel.from_pretrained(base, result.adapter_folder)
        torch.testing.assert_close(
            adapted(input_ids=rows.ids, attention_mask=mask).logits, ours, atol=1e-4, rtol=0
        )


def test_a_diverging_run_stops_with_an_error(tiny_folder: Path, tmp_path: Path):
    data = gc_set(4, 12, seed=12)
    huge = LabelledSet(data.ids, data.sequences, np.full((4, 1), 3e38, dtype=np.float32))
    with pytest.raises(FloatingPointError, match="diverged at step 1"):
        fit(tiny_folder, huge, None, REG, FitOptions(steps=2, batch_size=4), tmp_path / "run")


def test_an_undefined_metric_before_any_defined_one_does_not_stop_the_run(tiny_folder: Path, tmp_path: Path):
    train, valid = gc_set(8, 24, seed=13), gc_set(4, 24, seed=14)
    options = FitOptions(steps=4, batch_size=4, lr=1e-3, eval_every=1, patience=1)
    values = iter([float("nan"), float("nan"), 0.5, 0.4])
    result = fit(tiny_folder, train, valid, REG, options, tmp_path / "run", metric=lambda y, p: next(values))
    assert [h["metric"] for h in result.history] == [None, None, 0.5, 0.4]
    assert result.best_step == 3 and result.best_score == 0.5 and result.stopped_early and result.steps == 4


def test_head_lr_and_shift_augment(tiny_folder: Path, tmp_path: Path):
    """The new head trains at ``head_lr`` (scaled by the same schedule as the backbone), and
    ``shift_augment`` cuts 0..k-1 bases from the start of the training rows, drawn from the seed."""
    from hexamer.finetune.fit import build_model
    from hexamer.finetune.fit_loop import Trainer

    train = gc_set(16, 30, seed=4)
    options = FitOptions(method="full", steps=3, batch_size=8, lr=1e-3, head_lr=5e-3, shift_augment=True)
    assert FitOptions(method="full", lr=1e-3).resolved(256).head_lr == pytest.approx(1e-2)  # full: 10 x
    assert FitOptions(method="lora", lr=1e-3).resolved(256).head_lr == pytest.approx(1e-3)
    assert FitOptions(method="full").resolved(256).lr == 1e-3 and FitOptions().resolved(1024).lr == 2e-5
    options = options.resolved(64)
    model = build_model(tiny_folder, REG, options, {})
    trainer = Trainer(model, train, None, REG, options, "mse", None, False)
    head = {id(p) for p in model.score.parameters()}
    trainer.train_step()
    for group in trainer.optimizer.param_groups:
        in_head = {id(p) for p in group["params"]} <= head
        assert group["lr"] == pytest.approx(trainer.lr_at(0) * (5.0 if in_head else 1.0))
    shifts = np.concatenate([trainer.shifts(m, 8) for m in range(50)])
    assert set(shifts.tolist()) == set(range(6))
    assert (trainer.shifts(7, 8) == trainer.shifts(7, 8)).all()
    plain_options = FitOptions(method="full", steps=3, batch_size=8, shift_augment=False).resolved(64)
    plain = Trainer(model, train, None, REG, plain_options, "mse", None, False)
    assert not plain.shifts(7, 8).any()
    with pytest.raises(ValueError, match="shift_augment"):
        FitOptions(method="probe", shift_augment=True)
    assert FitOptions(method="lora").shift_augment and not FitOptions(method="probe").shift_augment


@pytest.mark.parametrize("method", ["full", "lora"])
def test_bf16_training_lowers_the_loss(tiny_folder: Path, tmp_path: Path, method: str):
    """bf16 autocast training (the CPU fast paths) learns: the mean training loss of the last
    steps is below that of the first ones, on one fixed batch."""
    data = gc_set(8, 30, seed=4)
    lora = LoraOptions(rank=4, alpha=8)
    options = FitOptions(method=method, steps=12, batch_size=8, lr=3e-3, head_lr=3e-3, warmup=0.0,
                         bf16=True, lora=lora, shift_augment=False, max_grad_norm=None)  # fmt: skip
    seen: list[float] = []
    fit(
        tiny_folder,
        data,
        None,
        REG,
        options,
        tmp_path / "run",
        on_progress=lambda p: seen.append(p.train_loss),
    )
    assert len(seen) == 12 and np.mean(seen[-3:]) < 0.7 * np.mean(seen[:3]), seen
