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
