"""TrainConfig validation and JSON round trip; learning-rate and objective schedules; AdamW groups."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
import torch

from hexamer.train import TrainConfig, build_optimizer, fns_weight_at, lr_at, lr_factor
from hexamer.train.init import new_model, new_model_config


def test_json_round_trip(tmp_path: Path) -> None:
    config = TrainConfig(data=["a.fa"], file_tags={"a.fa": "<x>"}, steps=50, warmup_steps=5, schedule="wsd")
    path = tmp_path / "c.json"
    config.to_json(path)
    assert TrainConfig.from_json(path) == config


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"objective": "kl"}, "objective must be one of"),
        ({"steps": 0}, "steps must be a positive integer"),
        ({"lr": -1.0}, "lr must be >= 0"),
        ({"val_fraction": 1.0}, "val_fraction must be below 1"),
        ({"rc_prob": 2}, "rc_prob must be a number in"),
        ({"stop_at": 2000}, "stop_at"),
        ({"file_tags": {"b.fa": "<x>"}}, "not in data"),
        ({"init": ".", "hidden_size": 64}, "only apply to a new model"),
        ({"init": "7b"}, "unknown init"),
        ({"resume": True, "resume_from": "x"}, "not both"),
    ],
)
def test_invalid_options(changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TrainConfig.from_dict({"data": ["a.fa"], **changes})


def test_unknown_keys_and_bad_json(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown training option"):
        TrainConfig.from_dict({"data": ["a.fa"], "learning_rate": 1e-3})
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(ValueError, match="not valid JSON"):
        TrainConfig.from_json(bad)


def test_cosine_schedule() -> None:
    kw = {"steps": 100, "warmup_steps": 10, "schedule": "cosine", "min_lr_ratio": 0.1}
    assert lr_factor(0, **kw) == pytest.approx(0.1)
    assert lr_factor(9, **kw) == pytest.approx(1.0)
    assert lr_factor(10, **kw) == pytest.approx(1.0)
    assert lr_factor(99, **kw) == pytest.approx(0.1)
    mid = lr_factor(round(10 + 89 / 2), **kw)
    assert 0.5 < mid < 0.6
    values = [lr_factor(s, **kw) for s in range(10, 100)]
    assert all(a >= b for a, b in itertools.pairwise(values))


def test_wsd_and_constant_schedules() -> None:
    kw = {"steps": 100, "warmup_steps": 10, "schedule": "wsd", "min_lr_ratio": 0.0, "decay_fraction": 0.2}
    assert [lr_factor(s, **kw) for s in (10, 50, 79)] == [1.0, 1.0, 1.0]
    assert lr_factor(80, **kw) == pytest.approx(1.0)
    assert lr_factor(99, **kw) == pytest.approx(0.0)
    assert lr_factor(90, **kw) == pytest.approx(1 - 10 / 19)
    assert lr_factor(50, steps=100, warmup_steps=0, schedule="constant") == 1.0
    assert lr_factor(9, steps=10, warmup_steps=100, schedule="constant") == 1.0  # warm-up capped
    with pytest.raises(ValueError, match="unknown schedule"):
        lr_factor(50, steps=100, warmup_steps=0, schedule="linear")


def test_staged_objective_and_fns_lr_scale() -> None:
    config = TrainConfig(
        data=["a.fa"],
        steps=100,
        warmup_steps=0,
        fns_start=0.6,
        fns_lr_scale=0.5,
        schedule="constant",
        lr=1e-3,
    )
    assert [fns_weight_at(config, s) for s in (0, 59, 60, 99)] == [0.0, 0.0, 1.0, 1.0]
    assert lr_at(config, 59) == pytest.approx(1e-3)
    assert lr_at(config, 60) == pytest.approx(5e-4)
    assert fns_weight_at(config.replace(objective="mix", fns_weight=0.25), 0) == 0.25
    assert fns_weight_at(config.replace(objective="ce"), 99) == 0.0
    assert fns_weight_at(config.replace(objective="fns"), 0) == 1.0


@pytest.mark.slow
def test_500m_shape_has_the_carbon_vocabulary() -> None:
    big, big_tok = new_model_config("500m-shape")  # decompresses the real Qwen3 BPE: seconds
    assert (big["num_hidden_layers"], big["hidden_size"], big["vocab_size"]) == (28, 1024, 155_776)
    assert big_tok.layout.dna_start_id == 151_669


def test_new_model_shapes_and_optimizer_groups() -> None:
    hf, tok = new_model_config("tiny", overrides={"hidden_size": 48, "num_heads": 3, "num_kv_heads": 1})
    assert hf["hidden_size"] == 48 and hf["head_dim"] == 16 and hf["vocab_size"] == len(tok)
    assert tok.layout.kmer_start == tok.layout.dna_start_id + 3
    with pytest.raises(ValueError, match="unknown init"):
        new_model_config("7b")
    model = new_model(hf, seed=0)
    opt = build_optimizer(model, TrainConfig(data=["a.fa"], weight_decay=0.05))
    decay, no_decay = opt.param_groups
    assert decay["weight_decay"] == 0.05 and no_decay["weight_decay"] == 0.0
    assert all(p.dim() == 2 for p in decay["params"]) and all(p.dim() == 1 for p in no_decay["params"])
    norms = [p for n, p in model.named_parameters() if n.endswith("norm.weight")]
    assert all(torch.equal(p, torch.ones_like(p)) for p in norms)
    std = model.embed_tokens.weight.std().item()
    assert math.isclose(std, 0.02, rel_tol=0.1)


def test_compositional_kmer_rows_are_additive() -> None:
    from hexamer.train.init import starting_point

    start = starting_point("tiny", overrides={"hidden_size": 32, "num_heads": 2, "num_kv_heads": 1})
    layout, emb = start.tokenizer.layout, start.model.embed_tokens.weight.detach()

    def row(kmer: str) -> torch.Tensor:
        return emb[layout.kmer_id(kmer)]

    # E[v] = sum_j P[j, v_j]: swapping halves between two k-mers keeps the sum
    torch.testing.assert_close(row("AAAAAA") + row("TTTTTT"), row("AAATTT") + row("TTTAAA"))
    assert math.isclose(float(emb[layout.kmer_start :][:4096].std()), 0.02, rel_tol=0.15)
    rand = starting_point(
        "tiny", overrides={"hidden_size": 32, "num_heads": 2, "num_kv_heads": 1}, kmer_init="random"
    )
    e2 = rand.model.embed_tokens.weight.detach()
    gap = (
        e2[layout.kmer_id("AAAAAA")]
        + e2[layout.kmer_id("TTTTTT")]
        - e2[layout.kmer_id("AAATTT")]
        - e2[layout.kmer_id("TTTAAA")]
    )
    assert float(gap.abs().max()) > 1e-3
