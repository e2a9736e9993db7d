"""Non-finite weights are refused as they are loaded, naming the file and tensor, by every reader:
the float loader (single file and shards, with the dtype conversion's overflow), the int8 reader
(quantized folders and float folders quantized while loading), and training's resume."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from hexamer.model import load_model
from hexamer.model.finite import NonFiniteWeightsError, check_finite_weight
from hexamer.model.quant import quantize_folder
from hexamer.synthetic import build_carbon_folder
from hexamer.tokenizer import ModelFolderError

NORM = "model.layers.0.input_layernorm.weight"


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_carbon_folder(tmp_path_factory.mktemp("good") / "m")


def _poisoned(src: Path, dst: Path, name: str, value: float, file: str = "model.safetensors") -> Path:
    """A copy of ``src`` whose tensor ``name`` in ``file`` holds ``value`` at two places."""
    shutil.copytree(src, dst)
    tensors = load_file(str(dst / file))
    t = tensors[name].clone()
    t.view(-1)[:2] = value
    tensors[name] = t
    save_file(tensors, str(dst / file), metadata={"format": "pt"})
    return dst


def test_check_finite_weight_counts_and_names() -> None:
    check_finite_weight(torch.ones(3), "w", "f.safetensors")
    check_finite_weight(torch.ones(3, dtype=torch.int8), "w", "f.safetensors")  # codes: always finite
    t = torch.tensor([1.0, float("nan"), float("inf"), float("nan")])
    with pytest.raises(
        NonFiniteWeightsError, match=r"'w' in f\.safetensors has 2 NaN values and 1 infinite value \(of 4\)"
    ):
        check_finite_weight(t, "w", "f.safetensors")
    stored = torch.tensor([1.0, 1e6])
    with pytest.raises(NonFiniteWeightsError, match=r"overflows float16: 1 stored value become"):
        check_finite_weight(stored.half(), "w", "f.safetensors", stored)


@pytest.mark.parametrize("value", [float("nan"), float("-inf")])
def test_float_loader_refuses_non_finite_weights(good: Path, tmp_path: Path, value: float) -> None:
    bad = _poisoned(good, tmp_path / "bad", NORM, value)
    kind = "NaN values" if value != value else "infinite values"
    with pytest.raises(ModelFolderError, match=rf"'{NORM}' in .*model\.safetensors has 2 {kind}"):
        load_model(bad)


def test_sharded_folder_names_the_shard(tmp_path: Path) -> None:
    folder = build_carbon_folder(tmp_path / "sharded", shards=3)
    shard = sorted(folder.glob("model-00003-*.safetensors"))[0]
    name = next(iter(load_file(str(shard))))
    _poisoned(folder, tmp_path / "bad", name, float("nan"), file=shard.name)
    with pytest.raises(NonFiniteWeightsError, match=rf"'{name}' in .*{shard.name} has 2 NaN"):
        load_model(tmp_path / "bad")


def test_a_value_the_load_dtype_cannot_hold_is_refused(good: Path, tmp_path: Path) -> None:
    big = _poisoned(good, tmp_path / "big", NORM, 1e6)
    load_model(big)  # finite in float32
    with pytest.raises(NonFiniteWeightsError, match=rf"'{NORM}' .* overflows float16"):
        load_model(big, dtype=torch.float16)


def test_int8_reader_refuses_non_finite_tensors(good: Path, tmp_path: Path) -> None:
    q = quantize_folder(good, tmp_path / "q")
    scale = "model.layers.1.mlp.down_proj.weight_scale"
    _poisoned(q, tmp_path / "bad_scale", scale, float("inf"))
    with pytest.raises(NonFiniteWeightsError, match=rf"'{scale}' .* has 2 infinite values"):
        load_model(tmp_path / "bad_scale")
    _poisoned(q, tmp_path / "bad_norm", NORM, float("nan"))  # float tensors of an int8 folder
    with pytest.raises(NonFiniteWeightsError, match=rf"'{NORM}' .* has 2 NaN"):
        load_model(tmp_path / "bad_norm")
    float_bad = _poisoned(good, tmp_path / "float_bad", NORM, float("nan"))
    with pytest.raises(NonFiniteWeightsError, match=NORM):  # a float folder quantized while loading
        load_model(float_bad, dtype="int8")
    with pytest.raises(NonFiniteWeightsError, match=NORM):  # and never written as int8
        quantize_folder(float_bad, tmp_path / "never")
    assert not (tmp_path / "never").exists()
