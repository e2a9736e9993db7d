"""Genome-NIAH task: loader, greedy generation, likelihood diagnostic, YaRN, metrics, heat-map."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from hexamer import Carbon
from hexamer.evals.niah_build import NiahBuildConfig, build_niah
from hexamer.evals.registry import get_task
from hexamer.evals.task import DatasetSchemaError, EvalContext
from hexamer.evals.tasks.niah import GenomeNiah
from hexamer.evals.tasks.niah_cells import cell_name, ctx_label, parse_cell, parse_ctx
from hexamer.evals.tasks.niah_scoring import value_logliks, yarn_carbon
from hexamer.fns import log_base_marginals
from hexamer.tokenizer.dna import encode_dna
from tests.evals.lookalike import write_parquet

BASES = "ATCG"  # vocabulary digit order


def _rows(human: str, n: int, ctx: int, start: int, prompt_bp: int = 90) -> list[dict]:
    rows = []
    for i in range(n):
        a = start + 200 * i
        prompt, value, wrong = (
            human[a : a + prompt_bp],
            human[a + 1000 : a + 1024],
            human[a + 2000 : a + 2024],
        )
        rows.append(
            {
                "uid": f"u{i}",
                "prompt": prompt,
                "value": value,
                "value_len_bp": 24,
                "context_length_tokens": ctx,
                "positive_sequence": prompt + value,
                "negative_sequence": prompt + wrong,
                "kingdom": "animals",
            }
        )
    return rows


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory, human_dna: str) -> Path:
    """Look-alike of the Hub layout: data/CONFIG/test-00000-of-00001.parquet."""
    root = tmp_path_factory.mktemp("niah") / "genomic-niah"
    rows = _rows(human_dna, 4, 4096, 0) + _rows(human_dna, 1, 8192, 5000)  # one row of another context
    write_parquet(root / "data" / "niah_4k" / "test-00000-of-00001.parquet", rows, row_group_size=2)
    write_parquet(
        root / "data" / "niah_neardup_d2_4k" / "test-00000-of-00001.parquet",
        _rows(human_dna, 3, 4096, 9000),
        row_group_size=2,
    )
    return root


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("built") / "genome-niah"
    build_niah(NiahBuildConfig(ctx=(128, 192), tasks=("niah", "neardup_d2"), n=3, seed=5), root)
    return root


def test_names() -> None:
    assert isinstance(get_task("niah"), GenomeNiah)
    assert parse_ctx("4k") == 4096 and parse_ctx("128k") == 131072 and parse_ctx(300) == 300
    assert ctx_label(65536) == "64k" and ctx_label(300) == "300"
    assert cell_name("niah", 4096) == "niah_4k" and cell_name("neardup_d2", 65536) == "niah_neardup_d2_64k"
    assert parse_cell("niah_neardup_d1_128k") == ("neardup_d1", 131072)
    assert parse_cell("niah_32k") == ("niah", 32768)
    assert parse_cell("niah_neardup_4k") is None
    ref = GenomeNiah.reference
    assert ref["Carbon-3B"]["gen_exact_match"] == ref["Carbon-3B"]["niah_64k.gen_exact_match"] == 0.79
    assert ref["Carbon-8B"]["niah_128k.gen_exact_match"] == pytest.approx(0.65)
    assert ref["Carbon-3B native"]["niah_32k.gen_exact_match"] == pytest.approx(0.55)


def test_load_hub_layout(hub: Path) -> None:
    ex = GenomeNiah().load(hub)
    cells = {e["config"] for e in ex}
    assert cells == {"niah_4k", "niah_neardup_d2_4k"}
    assert len(ex) == 7  # the 8k row in the niah_4k file is filtered out, as published
    assert all(e["ctx"] == 4096 for e in ex)
    e = next(e for e in ex if e["config"] == "niah_4k")
    assert e["neg_value"] and len(e["neg_value"]) == 24 and e["pos_value"] == e["value"]
    one = GenomeNiah().load(hub / "data" / "niah_neardup_d2_4k")
    assert {x["task"] for x in one} == {"neardup_d2"} and len(one) == 3
    file = GenomeNiah().load(hub / "data" / "niah_4k" / "test-00000-of-00001.parquet", limit=2, seed=42)
    sampled = np.random.RandomState(42).choice(5, 2, replace=False).tolist()  # df.sample(2, random_state=42)
    assert [x["row"] for x in file] == [i for i in sampled if i != 4]  # row 4 is the 8k row


def test_schema_error(tmp_path: Path, human_dna: str) -> None:
    rows = [{k: v for k, v in r.items() if k != "value_len_bp"} for r in _rows(human_dna, 2, 4096, 0)]
    write_parquet(tmp_path / "niah_4k" / "test.parquet", rows, row_group_size=2)
    with pytest.raises(DatasetSchemaError, match="value_len_bp") as err:
        GenomeNiah().load(tmp_path)
    assert "context_length_tokens" in str(err.value)  # the message lists every expected column
    with pytest.raises(FileNotFoundError):
        GenomeNiah().load(tmp_path / "nothing")


def _greedy(carbon: Carbon, prompt: str, n_tokens: int, choose: Callable[[torch.Tensor], int]) -> str:
    """Independent greedy decode: a full forward each step; ``choose`` picks the next 6-mer's
    index from the 4,096 6-mer logits."""
    lay = carbon.layout
    ids = [lay.begin_id, *encode_dna(prompt, lay).ids.tolist()]
    out = ""
    for _ in range(n_tokens):
        with torch.inference_mode():
            logits = carbon.model(torch.tensor([ids]), logits_at="all").logits[0, -1]
        pick = choose(logits[lay.kmer_start : lay.kmer_stop])
        ids.append(lay.kmer_start + pick)
        out += lay.kmers[pick]
    return out


def _greedy_token(carbon: Carbon, prompt: str, n_tokens: int) -> str:
    """Token-level greedy: argmax over the 6-mer logits."""
    return _greedy(carbon, prompt, n_tokens, lambda kmer_logits: int(torch.argmax(kmer_logits)))


def _greedy_bp(carbon: Carbon, prompt: str, n_tokens: int) -> str:
    """bp-level greedy: argmax of each of the six FNS marginals, token by token."""
    lay = carbon.layout

    def choose(kmer_logits: torch.Tensor) -> int:
        digits = log_base_marginals(kmer_logits.float()).argmax(-1).tolist()  # (6,) in A,T,C,G order
        return lay.kmers.index("".join(BASES[d] for d in digits))

    return _greedy(carbon, prompt, n_tokens, choose)


def _token_ll(carbon: Carbon, prompt: str, value: str) -> float:
    """Independent: one forward over <dna> + prompt + value, full-vocab log-softmax of value tokens."""
    lay = carbon.layout
    ids = [lay.begin_id, *encode_dna(prompt + value, lay).ids.tolist()]
    n_val = len(value) // 6
    with torch.inference_mode():
        logp = torch.log_softmax(carbon.model(torch.tensor([ids]), logits_at="all").logits[0].double(), -1)
    return float(np.mean([logp[i - 1, ids[i]].item() for i in range(len(ids) - n_val, len(ids))]))


def _bp_ll(carbon: Carbon, prompt: str, value: str) -> float:
    lp = carbon.base_logprobs(prompt + value)[-len(value) :]  # (24, 4), columns A, C, G, T
    return float(np.mean([lp[i, "ACGT".index(b)] for i, b in enumerate(value)]))


def test_score_matches_independent_paths(built: Path, carbon: Carbon) -> None:
    task = GenomeNiah()
    ex = task.load(built / "niah_neardup_d2_128")
    for level, greedy, ll in (("token", _greedy_token, _token_ll), ("bp", _greedy_bp, _bp_ll)):
        recs = list(task.score(ex, EvalContext(carbon=carbon, level=level, batch_size=2)))
        assert [r["id"] for r in sorted(recs, key=lambda r: r["id"])] == sorted(e["id"] for e in ex)
        by_id = {r["id"]: r for r in recs}
        for e in ex:
            r = by_id[e["id"]]
            assert r["trimmed_bp"] == 0 and r["n_tokens"] == 128
            assert r["pred"] == greedy(carbon, e["prompt"], 4)
            v = e["value"]
            assert r["gen_exact_match"] == int(r["pred"] == v)
            assert r["gen_base_accuracy"] == pytest.approx(
                sum(a == b for a, b in zip(r["pred"], v, strict=True)) / 24
            )
            assert r["ll_pos"] == pytest.approx(ll(carbon, e["prompt"], v), abs=2e-4)
            assert r["ll_neg"] == pytest.approx(ll(carbon, e["prompt"], e["neg_value"]), abs=2e-4)
            assert r["ll_correct"] == int(r["ll_pos"] > r["ll_neg"])
            assert r["ll_margin"] == pytest.approx(r["ll_pos"] - r["ll_neg"])


def test_value_logliks_single_and_uneven(carbon: Carbon, human_dna: str) -> None:
    prompt = human_dna[:120]
    a, b = human_dna[500:524], human_dna[600:630]
    both = value_logliks(carbon, prompt, [a, b])
    assert both[0] == pytest.approx(value_logliks(carbon, prompt, [a])[0], abs=1e-5)
    assert both[0] == pytest.approx(_token_ll(carbon, prompt, a), abs=2e-4)
    with pytest.raises(ValueError, match="multiple of 6"):
        value_logliks(carbon, prompt[:-1], [a])


def test_retrieval_is_scored_right(carbon: Carbon, human_dna: str) -> None:
    """Whatever the model says is the value: a row whose value is the model's own greedy output
    must be an exact match (checks the comparison and the prompt/value plumbing)."""
    prompt = human_dna[3000:3600]
    own = _greedy_token(carbon, prompt, 4)
    ex = [
        {
            "id": "x",
            "config": "niah_128",
            "task": "niah",
            "ctx": 128,
            "uid": "x",
            "file": "f",
            "row": 0,
            "prompt": "GA" + prompt,
            "value": own,
            "value_len_bp": 24,
            "pos_value": own,
            "neg_value": human_dna[:24],
            "depth": 0.5,
        }
    ]
    (rec,) = GenomeNiah().score(ex, EvalContext(carbon=carbon, level="token"))
    assert rec["trimmed_bp"] == 2  # cut from the left to whole 6-mers
    assert rec["pred"] == own and rec["gen_exact_match"] == 1 and rec["gen_base_accuracy"] == 1.0


def test_bad_rows_do_not_stop_the_batch(carbon: Carbon, human_dna: str) -> None:
    good = {
        "id": "g",
        "config": "niah_128",
        "task": "niah",
        "ctx": 128,
        "uid": "g",
        "file": "f",
        "row": 0,
        "prompt": human_dna[:120],
        "value": human_dna[200:224],
        "value_len_bp": 24,
        "pos_value": human_dna[200:224],
        "neg_value": None,
        "depth": None,
    }
    bad = dict(good, id="b", value_len_bp=30)
    long = dict(good, id="l", prompt=human_dna[: 6 * carbon.context_length])
    recs = {
        r["id"]: r for r in GenomeNiah().score([bad, good, long], EvalContext(carbon=carbon, level="token"))
    }
    assert "value_len_bp" in recs["b"]["error"]
    assert "context" in recs["l"]["error"]
    assert recs["g"]["gen_exact_match"] in (0, 1) and recs["g"]["ll_correct"] is None and recs["g"]["ll_note"]
    m = GenomeNiah().metrics(list(recs.values()))
    assert m["n"] == 3 and m["n_errors"] == 2


def test_metrics_hand_computed() -> None:
    recs = [
        {
            "id": "1",
            "config": "niah_4k",
            "task": "niah",
            "ctx": 4096,
            "gen_exact_match": 1,
            "gen_base_accuracy": 1.0,
            "ll_correct": 1,
            "ll_margin": 0.5,
        },
        {
            "id": "2",
            "config": "niah_4k",
            "task": "niah",
            "ctx": 4096,
            "gen_exact_match": 0,
            "gen_base_accuracy": 0.5,
            "ll_correct": 0,
            "ll_margin": -0.1,
        },
        {
            "id": "3",
            "config": "niah_neardup_d2_8k",
            "task": "neardup_d2",
            "ctx": 8192,
            "gen_exact_match": 0,
            "gen_base_accuracy": 0.25,
            "ll_correct": 1,
            "ll_margin": 0.2,
        },
        {
            "id": "4",
            "config": "niah_neardup_d2_8k",
            "task": "neardup_d2",
            "ctx": 8192,
            "gen_exact_match": None,
            "gen_base_accuracy": None,
            "error": "too long",
        },
    ]
    m = GenomeNiah().metrics(recs)
    assert m["gen_exact_match"] == pytest.approx(1 / 3)
    assert m["gen_base_accuracy"] == pytest.approx((1 + 0.5 + 0.25) / 3)
    assert m["ll_correct"] == pytest.approx(2 / 3) and m["ll_margin"] == pytest.approx(0.2)
    assert m["niah_4k.gen_exact_match"] == pytest.approx(0.5) and m["niah_4k.n"] == 2
    assert m["niah_neardup_d2_8k.gen_exact_match"] == pytest.approx(0.0)
    assert m["niah_neardup_d2_8k.n"] == 2 and m["n_errors"] == 1


def test_heatmap(tmp_path: Path) -> None:
    recs = [
        {
            "id": str(i),
            "config": cell_name(t, c),
            "task": t,
            "ctx": c,
            "gen_exact_match": int(i % 2 == 0),
            "with_yarn": True,
        }
        for i, (t, c) in enumerate(
            [("niah", 4096), ("niah", 8192), ("neardup_d2", 4096), ("neardup_d4", 65536)]
        )
    ]
    (path,) = GenomeNiah().plots(recs, tmp_path / "p")
    assert path.name == "niah-heatmap.png" and path.read_bytes()[:4] == b"\x89PNG"
    assert GenomeNiah().plots([{"id": "x", "gen_exact_match": None}], tmp_path / "q") == []


def test_with_rope_equals_patched_config(tiny_folder: Path, carbon: Carbon, tmp_path: Path) -> None:
    """YaRN through Carbon.with_rope == loading a folder whose config.json carries the override."""
    folder = tmp_path / "yarn"
    shutil.copytree(tiny_folder, folder)
    cfg = json.loads((folder / "config.json").read_text())
    cfg["max_position_embeddings"] = 65536
    cfg["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    (folder / "config.json").write_text(json.dumps(cfg))
    patched = Carbon.from_pretrained(folder)
    yarn = yarn_carbon(carbon)
    assert yarn.context_length == 65536 and carbon.context_length == 2048  # the original is untouched
    assert yarn.model.config.rope.theta == carbon.model.config.rope.theta
    ids = torch.tensor([[carbon.layout.begin_id, *encode_dna("ACGTTG" * 40, carbon.layout).ids.tolist()]])
    with torch.inference_mode():
        a = yarn.model(ids).logits
        b = patched.model(ids).logits
        native = carbon.model(ids).logits
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(a, native, atol=1e-4)  # YaRN really changes the rotary frequencies


def test_end_to_end_with_and_without_yarn(tmp_path: Path, carbon: Carbon) -> None:
    """A cell longer than the tiny model's 2,048-token window: an error per row natively, scored
    with YaRN (65,536 positions); and the short cells run both ways."""
    root = tmp_path / "genome-niah"
    build_niah(NiahBuildConfig(ctx=(128, 2100), tasks=("niah",), n=2, seed=1), root)
    task = GenomeNiah()
    ex = task.load(root)
    native = list(task.score(ex, EvalContext(carbon=carbon, level="token")))
    yarn = list(task.score(ex, EvalContext(carbon=carbon, level="token", options={"with_yarn": True})))
    long_native = [r for r in native if r["ctx"] == 2100]
    assert all("context" in r["error"] for r in long_native)
    long_yarn = [r for r in yarn if r["ctx"] == 2100]
    assert all(r.get("error") is None and len(r["pred"]) == 24 and r["with_yarn"] for r in long_yarn)
    m_native, m_yarn = task.metrics(native), task.metrics(yarn)
    assert m_native["niah_2100.n"] == 2 and m_native["n_errors"] == 2 and m_yarn["n_errors"] == 0
    assert 0.0 <= m_yarn["gen_base_accuracy"] <= 1.0
    short_native = {r["id"]: r for r in native if r["ctx"] == 128}
    for r in yarn:
        if r["ctx"] == 128:
            assert r["ll_pos"] != short_native[r["id"]]["ll_pos"]  # a different rotary, a different model
    (png,) = task.plots(yarn, tmp_path / "plots")
    assert png.is_file() and png.stat().st_size > 1000


def test_cell_selection_options(built: Path) -> None:
    task = GenomeNiah()
    task.configure({"tasks": "neardup_d2", "ctx": "192"})
    assert {e["config"] for e in task.load(built)} == {"niah_neardup_d2_192"}
    task.configure({"tasks": "all", "ctx": "128,192"})
    assert len({e["config"] for e in task.load(built)}) == 4
