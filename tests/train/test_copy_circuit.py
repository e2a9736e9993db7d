"""A new model started with the copy circuit copies from its context before any training, in
``transformers`` as in hexamer, and the option is refused where it cannot apply."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from hexamer.demo.markov import acgt_codes
from hexamer.train.copy_circuit import RESERVED, CircuitFreeze, plant_copy_circuit
from hexamer.train.init import starting_point

from .helpers import init_config, periodic_dna, tiny_config, write_fasta

SHAPE = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_layers": 2,
    "num_heads": 2,
    "num_kv_heads": 1,
    "context_length": 512,
    "tie_embeddings": False,
}


def _start(copy_circuit: bool):
    return starting_point("tiny", seed=0, overrides=SHAPE, kmer_init="random", copy_circuit=copy_circuit)


def _rows(layout, n: int, gap: int, seed: int = 1) -> torch.Tensor:
    """``<dna>`` + X (n random k-mers) + gap random k-mers + X again, 3 rows."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 4**layout.k, (3, n), generator=g) + layout.kmer_start
    mid = torch.randint(0, 4**layout.k, (3, gap), generator=g) + layout.kmer_start
    return torch.cat([torch.full((3, 1), layout.dna_start_id), x, mid, x], dim=1)


def _token_logp(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    return F.log_softmax(logits[:, :-1].float(), -1).gather(-1, ids[:, 1:, None])[..., 0]


def test_the_planted_model_copies_the_second_copy_and_knows_nothing_of_the_first() -> None:
    start = _start(True)
    layout = start.tokenizer.layout
    ids = _rows(layout, n=60, gap=40)
    with torch.no_grad():
        lp = _token_logp(start.model.eval()(ids, logits_at="all", fp32_logits=True).logits, ids)
    first, second = lp[:, :60], lp[:, 60 + 40 + 2 :]  # the copy's first two tokens have no full key yet
    uniform = -torch.log(torch.tensor(float(4**layout.k)))
    assert abs(first.mean() - uniform) < 0.5  # no information before the repeat
    assert second.mean() > -0.5  # nats per token, i.e. better than -0.09 nats per base
    baseline = _start(False)
    with torch.no_grad():
        plain = _token_logp(baseline.model.eval()(ids, logits_at="all", fp32_logits=True).logits, ids)
    assert plain[:, 60 + 40 + 2 :].mean() < uniform + 0.5  # a random start does not copy


def test_transformers_runs_the_planted_model_the_same(tmp_path: Path) -> None:
    from transformers import LlamaForCausalLM

    from hexamer.train.checkpoint import write_model_folder

    start = _start(True)
    write_model_folder(tmp_path / "m", start.model, start.hf_config, start.tokenizer)
    ref = LlamaForCausalLM.from_pretrained(tmp_path / "m", torch_dtype=torch.float32).eval()
    ids = _rows(start.tokenizer.layout, n=40, gap=20, seed=3)
    with torch.no_grad():
        ours = start.model.eval()(ids, logits_at="all", fp32_logits=True).logits
        theirs = ref(input_ids=ids).logits
    assert torch.allclose(ours, theirs, atol=2e-3, rtol=1e-4)
    assert _token_logp(theirs, ids)[:, 40 + 20 + 2 :].mean() > -0.5


def test_the_circuit_needs_an_untied_head_and_room() -> None:
    tied = starting_point("tiny", seed=0, overrides={**SHAPE, "tie_embeddings": True})
    with pytest.raises(ValueError, match="untied LM head"):
        plant_copy_circuit(tied.model, tied.tokenizer.layout.kmer_start)
    one_layer = starting_point("tiny", seed=0, overrides={**SHAPE, "num_layers": 1})
    with pytest.raises(ValueError, match="at least 2 layers"):
        plant_copy_circuit(one_layer.model, one_layer.tokenizer.layout.kmer_start)
    narrow = starting_point("tiny", seed=0, overrides={**SHAPE, "hidden_size": 64, "num_heads": 2})
    with pytest.raises(ValueError, match="hidden_size"):
        plant_copy_circuit(narrow.model, narrow.tokenizer.layout.kmer_start)


def test_train_config_refuses_the_circuit_on_a_tied_or_existing_model(
    tmp_path: Path, tiny_folder: Path
) -> None:
    data = write_fasta(tmp_path / "d.fa", {"s": periodic_dna(3000)})
    with pytest.raises(ValueError, match="no-tie-embeddings"):
        tiny_config(data, tmp_path / "o", copy_circuit=True)
    with pytest.raises(ValueError, match="only applies to a new model"):
        init_config(data, tmp_path / "o", str(tiny_folder)).replace(copy_circuit=True)


def test_a_run_started_with_the_circuit_copies_and_resumes_only_with_it(tmp_path: Path) -> None:
    """``hexamer train --copy-circuit``: the run's final folder still copies a random sequence's
    second copy after a few steps on DNA, and a resume must agree on the option."""
    from hexamer import Carbon
    from hexamer.train import train

    rng = torch.Generator().manual_seed(5)
    unit = "".join("ACGT"[i] for i in torch.randint(0, 4, (300,), generator=rng).tolist())
    data = write_fasta(tmp_path / "d.fa", {"s": periodic_dna(3000)})
    shape = {
        "hidden_size": 128, "intermediate_size": 256, "num_layers": 2, "num_heads": 2,
        "num_kv_heads": 1, "context_length": 256, "window_bp": 600, "tie_embeddings": False,
    }  # fmt: skip
    config = tiny_config(data, tmp_path / "run", steps=4, lr=1e-3, copy_circuit=True, **shape)
    result = train(config, progress=False)
    assert result.final_dir is not None
    carbon = Carbon.from_pretrained(result.final_dir)
    lp = carbon.base_logprobs(unit + unit, method="exact")
    true = lp[range(600), acgt_codes(unit + unit)]
    assert true[312:].mean() > -0.5 > true[:300].mean()  # the copy, from its third token on
    from safetensors.torch import load_file

    saved = load_file(result.final_dir / "model.safetensors")
    model_shape = {k: v for k, v in shape.items() if k != "window_bp"}
    planted = starting_point(  # the run's start: the values it had to keep
        "tiny", seed=config.seed, overrides=model_shape, kmer_init=config.kmer_init, copy_circuit=True
    ).model
    hd = planted.config.head_dim
    for part in ("q_proj", "k_proj", "v_proj"):
        kept = saved[f"model.layers.1.self_attn.{part}.weight"][:hd]
        assert torch.equal(kept, planted.layers[1].self_attn.get_submodule(part).weight[:hd].to(kept.dtype))
    again = tiny_config(data, tmp_path / "run", steps=6, lr=1e-3, resume=True, **shape)
    with pytest.raises(ValueError, match="copy_circuit"):
        train(again, progress=False)


def test_the_freeze_keeps_every_planted_weight_and_trains_the_rest() -> None:
    """AdamW with weight decay for a few steps: the circuit's weights and the reserved rows and
    columns stay bit for bit, everything else moves, and the model still copies."""
    start = _start(True)
    model = start.model.train()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    freeze = CircuitFreeze(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    ids = _rows(start.tokenizer.layout, n=30, gap=10, seed=4)
    for _ in range(3):
        opt.zero_grad()
        logits = model(ids, logits_at="all", fp32_logits=True).logits
        F.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten()).backward()
        freeze.zero_grads()
        opt.step()
        freeze.restore()
    assert freeze.drift() == 0.0
    p = dict(model.named_parameters())
    hd = model.config.head_dim
    for name in ("embed_tokens.weight", "lm_head.weight"):
        assert torch.equal(p[name][:, :RESERVED], before[name][:, :RESERVED])
        assert not torch.equal(p[name][:, RESERVED:], before[name][:, RESERVED:])
    for i in range(model.config.num_hidden_layers):
        for name in (f"layers.{i}.self_attn.o_proj.weight", f"layers.{i}.mlp.down_proj.weight"):
            assert torch.equal(p[name][:RESERVED], before[name][:RESERVED])
            if name != "layers.0.self_attn.o_proj.weight":  # at 2 heads, both of layer 0's are planted
                assert not torch.equal(p[name][RESERVED:], before[name][RESERVED:])
    q0, q1 = p["layers.0.self_attn.q_proj.weight"], p["layers.1.self_attn.q_proj.weight"]
    assert torch.equal(q0[: 2 * hd], before["layers.0.self_attn.q_proj.weight"][: 2 * hd])
    assert torch.equal(q1[:hd], before["layers.1.self_attn.q_proj.weight"][:hd])
    assert not torch.equal(q1[hd:], before["layers.1.self_attn.q_proj.weight"][hd:])
    assert not torch.equal(p["norm.weight"], before["norm.weight"])  # the copy gain learns
    with torch.no_grad():
        lp = _token_logp(model.eval()(ids, logits_at="all", fp32_logits=True).logits, ids)
    assert lp[:, 30 + 10 + 2 :].mean() > -0.5


def test_the_freeze_refuses_a_model_without_the_circuits_shape() -> None:
    tied = starting_point("tiny", seed=0, overrides={**SHAPE, "tie_embeddings": True})
    with pytest.raises(ValueError, match="untied LM head"):
        CircuitFreeze(tied.model)


def test_a_run_refuses_a_shape_without_room_before_reading_its_data(tmp_path: Path) -> None:
    """The shape is checked first: the data file named here does not even exist."""
    from hexamer.train import train
    from hexamer.train.init import check_copy_circuit_shape

    shape = {**SHAPE, "num_layers": 1}
    with pytest.raises(ValueError, match="at least 2 layers"):
        check_copy_circuit_shape("tiny", shape)
    config = tiny_config(tmp_path / "missing.fa", tmp_path / "run", copy_circuit=True, **shape)
    with pytest.raises(ValueError, match="at least 2 layers"):
        train(config, progress=False)
    with pytest.raises(ValueError, match="2 query heads"):
        check_copy_circuit_shape("tiny", {**SHAPE, "num_kv_heads": 2})
