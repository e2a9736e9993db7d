import subprocess
import sys

import pytest

from hexamer.finetune.options import FitOptions, LoraOptions


@pytest.mark.parametrize(
    "bad",
    [
        {"method": "adapter"},
        {"schedule": "linear"},
        {"epochs": 0},
        {"steps": 0},
        {"batch_size": 0},
        {"lr": 0.0},
        {"lr": float("nan")},
        {"warmup": 1.5},
        {"weight_decay": -1.0},
        {"grad_accum": 0},
        {"patience": 0},
        {"eval_every": 0},
        {"class_weights": (1.0, -2.0)},
        {"class_weights": ()},
        {"plateau_factor": 1.0},
        {"max_grad_norm": 0.0},
        {"pooling": "max"},
        {"seed": -1},
        {"huber_delta": 0.0},
        {"epochs": True},
    ],
)
def test_every_number_is_range_checked(bad):
    with pytest.raises(ValueError):
        FitOptions(**bad)


def test_json_round_trip():
    options = FitOptions(
        method="lora", lora=LoraOptions(rank=4, targets=("q_proj", "up_proj")), class_weights=(1, 2)
    )
    assert FitOptions.from_json(options.to_json()) == options


def test_options_and_task_stay_torch_free():
    code = (
        "import sys\n"
        "import hexamer.finetune as f\n"
        "f.FitOptions(method='lora', lora=f.LoraOptions(rank=4)); f.TaskSpec('binary', ('y',))\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_defaults_are_the_measured_ones():
    """docs/finetune.md, "Defaults and why": the values its table measured on the demo model."""
    full = FitOptions().resolved(256)
    assert (full.method, full.epochs, full.batch_size, full.pooling) == ("full", 10, 16, "mean")
    assert (full.lr, full.head_lr, full.shift_augment, full.warmup) == (1e-3, 1e-2, True, 0.05)
    lora = FitOptions(method="lora").resolved(256)
    assert (lora.lr, lora.head_lr, lora.shift_augment) == (3e-3, 3e-3, True)
    probe = FitOptions(method="probe").resolved(256)
    assert (probe.lr, probe.shift_augment) == (1e-2, False)
    # a Carbon-sized model gets the official recipes' rate; given rates are kept
    assert FitOptions().resolved(1536).lr == 2e-5 and FitOptions(method="lora").resolved(1536).lr == 2e-4
    assert FitOptions(lr=5e-5, head_lr=1e-4).resolved(1536).head_lr == 1e-4
    unresolved = FitOptions()
    assert unresolved.lr is None and FitOptions.from_json(unresolved.to_json()) == unresolved
    with pytest.raises(ValueError, match="head_lr"):
        FitOptions(head_lr=0.0)
