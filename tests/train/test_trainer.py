"""The training loop end to end on tiny runs: learning, checkpoints, resume, bad input."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from hexamer import Carbon
from hexamer.model import load_model
from hexamer.train import train
from hexamer.train.checkpoint import list_checkpoints
from tests.train.helpers import init_config, tiny_config, write_fasta


def test_loss_decreases_and_checkpoints_load_everywhere(dna_file: Path, tmp_path: Path) -> None:
    config = tiny_config(
        dna_file, tmp_path / "run", steps=40, lr=2e-2, rc_prob=0.0, fns_start=0.5, save_every=20
    )
    result = train(config, progress=False)
    assert result.step == 40 and result.final_dir is not None
    ce = [r["ce"] for r in result.history if r["ce"] is not None]
    fns = [r["fns"] for r in result.history if r["fns"] is not None]
    assert len(ce) == 20 and len(fns) == 20  # staged: CE for the first half, FNS after
    assert sum(ce[-4:]) / 4 < sum(ce[:4]) / 4 - 0.5
    assert sum(fns[-4:]) / 4 < sum(fns[:4]) / 4
    val = result.last_validation
    assert val is not None and val["val_accuracy"] > 0.6  # the motif is learnable; chance is ~0.3
    assert [p.name for p in list_checkpoints(tmp_path / "run")] == [
        "checkpoint-0000020",
        "checkpoint-0000040",
    ]
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert metrics[-1]["step"] == 40

    # the final folder is a Carbon checkpoint: hexamer, Carbon and transformers all read it
    final = result.final_dir
    assert not (final / "optimizer.safetensors").exists()
    weights = load_file(str(final / "model.safetensors"))
    assert "lm_head.weight" not in weights  # tied head not stored
    ours, _ = load_model(final)
    transformers = pytest.importorskip("transformers")
    hf = transformers.LlamaForCausalLM.from_pretrained(final, dtype=torch.float32).eval()
    ids = torch.tensor([[final_id for final_id in range(400, 450)]])
    with torch.no_grad():
        a = ours(ids, logits_at="all").logits
        b = hf(ids).logits
    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)

    m = Carbon.from_pretrained(final)
    score = m.score("ATGCGTATGCGTATGCGTATGCGT")
    assert score.n_scored == 24 and score.mean > -1.386  # better than uniform on the training motif
    gen = m.generate("ATGCGTATGCGT", max_bp=12, temperature=0)
    assert len(gen.sequence) == 12


def test_resume_continues_the_same_run(dna_file: Path, tmp_path: Path) -> None:
    common = {"steps": 10, "objective": "staged", "fns_start": 0.5, "schedule": "wsd", "decay_fraction": 0.4}
    whole = train(tiny_config(dna_file, tmp_path / "whole", **common), progress=False)

    half = train(tiny_config(dna_file, tmp_path / "split", stop_at=5, **common), progress=False)
    assert half.step == 5 and half.final_dir is None and half.checkpoint is not None
    rest = train(tiny_config(dna_file, tmp_path / "split", resume=True, **common), progress=False)
    assert rest.step == 10 and rest.final_dir is not None

    assert rest.final_loss == pytest.approx(whole.final_loss, rel=1e-5, abs=1e-6)
    assert [r["lr"] for r in rest.history] == pytest.approx([r["lr"] for r in whole.history])
    assert [r["loss"] for r in rest.history] == pytest.approx([r["loss"] for r in whole.history], rel=1e-5)
    a = load_file(str(whole.final_dir / "model.safetensors"))
    b = load_file(str(rest.final_dir / "model.safetensors"))
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=1e-5, atol=1e-6)
    oa = load_file(str(whole.checkpoint / "optimizer.safetensors"))
    ob = load_file(str(rest.checkpoint / "optimizer.safetensors"))
    for name in oa:
        if not name.startswith("rng::"):
            torch.testing.assert_close(oa[name], ob[name], rtol=1e-5, atol=1e-7)


def test_resume_refuses_a_different_run(dna_file: Path, tmp_path: Path) -> None:
    train(tiny_config(dna_file, tmp_path / "run", steps=4, stop_at=2), progress=False)
    with pytest.raises(ValueError, match="lr"):
        train(tiny_config(dna_file, tmp_path / "run", steps=4, lr=1e-2, resume=True), progress=False)
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        train(tiny_config(dna_file, tmp_path / "empty", steps=4, resume=True), progress=False)


def test_mix_objective_and_grad_accum(dna_file: Path, tmp_path: Path) -> None:
    result = train(
        tiny_config(dna_file, tmp_path / "mix", steps=3, objective="mix", fns_weight=0.3, grad_accum=2),
        progress=False,
    )
    assert all(r["ce"] is not None and r["fns"] is not None for r in result.history)
    r = result.history[-1]
    assert r["loss"] == pytest.approx(0.7 * r["ce"] + 0.3 * r["fns"])


def test_fine_tune_a_folder_and_save_dtype(dna_file: Path, tmp_path: Path, tiny_folder: Path) -> None:
    config = init_config(dna_file, tmp_path / "ft", str(tiny_folder), steps=2, save_dtype="bfloat16")
    result = train(config, progress=False)
    assert result.final_dir is not None
    weights = load_file(str(result.final_dir / "model.safetensors"))
    assert {t.dtype for t in weights.values()} == {torch.bfloat16}
    saved = json.loads((result.final_dir / "config.json").read_text())
    assert saved["torch_dtype"] == "bfloat16" and saved["num_hidden_layers"] == 2
    assert Carbon.from_pretrained(result.final_dir).score("ACGTACGTACGT").n_scored == 12


def test_bad_input_gives_clear_errors(dna_file: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty.fa"
    empty.write_text("")
    with pytest.raises(ValueError, match="empty"):
        train(tiny_config(empty, tmp_path / "a"), progress=False)
    short = write_fasta(tmp_path / "short.fa", {"s1": "ACGT" * 10, "s2": "ACGTAC" * 5})
    with pytest.raises(ValueError, match="no training sequence is at least window_bp=120"):
        train(tiny_config(short, tmp_path / "b"), progress=False)
    with pytest.raises(ValueError, match="unknown init 'huge'"):
        train(init_config(dna_file, tmp_path / "c", "huge"), progress=False)
    with pytest.raises(ValueError, match="context of 64"):
        train(tiny_config(dna_file, tmp_path / "d", window_bp=600), progress=False)
    with pytest.raises(FileNotFoundError, match="not found"):
        train(tiny_config(tmp_path / "missing.fa", tmp_path / "e"), progress=False)


def test_bf16_autocast_path_trains_and_saves_fp32(dna_file: Path, tmp_path: Path) -> None:
    """``--precision bf16`` (the CUDA default) also runs under CPU autocast: finite, decreasing CE,
    master weights and the saved checkpoint stay float32."""
    config = tiny_config(
        dna_file, tmp_path / "run", steps=12, lr=2e-2, rc_prob=0.0, fns_start=0.5, precision="bf16"
    )
    result = train(config, progress=False)
    losses = [r["ce"] if r["ce"] is not None else r["fns"] for r in result.history]
    assert all(math.isfinite(x) for x in losses)
    ce = [r["ce"] for r in result.history if r["ce"] is not None]
    assert ce[-1] < ce[0]
    assert result.final_dir is not None
    weights = load_file(str(result.final_dir / "model.safetensors"))
    assert {t.dtype for t in weights.values()} == {torch.float32}
