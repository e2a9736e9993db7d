"""embed_sequences: pooling modes and layers against a direct forward, chunking, writers."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from hexamer import Carbon
from hexamer.embed import chunk_plan, embed_sequences, ids_path, write_embeddings
from hexamer.embed.chunks import Chunk
from hexamer.io import BadRecord, SequenceRecord

ATOL = 1e-5


def _dna(n: int, seed: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice("ACGT") for _ in range(n))


def _direct(
    carbon: Carbon, content_ids: list[int], layer: int, prefix: list[int] | None = None
) -> torch.Tensor:
    lay = carbon.layout
    ids = [*(prefix or []), lay.begin_id, *content_ids, lay.end_id]
    out = carbon.model(torch.tensor([ids]), logits_at="none", return_layer_hidden=True)
    return out.layer_hidden[layer][0].double()


def _content(carbon: Carbon, seq: str) -> list[int]:
    return carbon.tokenizer.encode_dna(seq, tags=False).tolist()


@pytest.mark.parametrize("layer", [-1, 0, 1, -2])
@pytest.mark.parametrize("pool", ["mean", "last", "sep"])
def test_pooling_matches_a_direct_forward(carbon: Carbon, pool: str, layer: int) -> None:
    seqs = {"a": _dna(100, 1), "b": _dna(37, 2) + "NNNN" + _dna(20, 3), "c": _dna(700, 4)}
    got = dict(embed_sequences(carbon, list(seqs.items()), pool=pool, layer=layer))  # type: ignore[arg-type]
    for name, seq in seqs.items():
        content = _content(carbon, seq)
        h = _direct(carbon, content, layer)
        want = {"mean": h[1 : 1 + len(content)].mean(0), "last": h[len(content)], "sep": h[len(content) + 1]}[
            pool
        ]
        vec = got[name]
        assert vec is not None and vec.dtype == np.float32 and vec.shape == (carbon.model.config.hidden_size,)
        np.testing.assert_allclose(vec, want.numpy(), atol=ATOL)


def test_final_layer_is_the_normed_hidden_state(carbon: Carbon) -> None:
    seq = _dna(60, 9)
    ((_, a),) = embed_sequences(carbon, [seq], pool="sep", layer=-1)
    ((_, b),) = embed_sequences(carbon, [seq], pool="sep", layer=carbon.model.config.num_hidden_layers)
    assert a is not None and b is not None
    np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="layer 5 is out of range"):
        embed_sequences(carbon, [seq], layer=5)
    with pytest.raises(ValueError, match="pool must be one of"):
        embed_sequences(carbon, [seq], pool="max")  # type: ignore[arg-type]


def test_prefix_tags_go_before_dna(carbon: Carbon) -> None:
    seq = _dna(90, 5)
    ((_, vec),) = embed_sequences(carbon, [seq], pool="sep", prefix="<mammalian_species>")
    prefix = carbon.tokenizer.encode("<mammalian_species>")
    h = _direct(carbon, _content(carbon, seq), -1, prefix)
    np.testing.assert_allclose(vec, h[-1].numpy(), atol=ATOL)


def test_chunk_plan_owns_every_token_once() -> None:
    assert chunk_plan(5, 8, 2) == [Chunk(0, 5, 0)]
    for n, cap, ov in [(10, 4, 1), (100, 16, 5), (17, 16, 15), (33, 8, 0)]:
        plan = chunk_plan(n, cap, ov)
        owned = [t for c in plan for t in range(c.own, c.end)]
        assert owned == list(range(n))
        assert all(c.end - c.start <= cap for c in plan)
        assert all(c.own - c.start >= min(ov, c.own) for c in plan)  # left context of >= overlap
        assert plan[-1].end == n and plan[-1].end - plan[-1].start == cap  # last one right-aligned, full
    with pytest.raises(ValueError, match="overlap"):
        chunk_plan(10, 4, 4)


@pytest.mark.parametrize("pool", ["mean", "last", "sep"])
def test_long_sequences_are_chunked_and_aggregated(carbon: Carbon, pool: str) -> None:
    seq = _dna(6 * 95 + 4, 7)  # 96 content tokens, the last one a padded tail
    max_tokens, overlap_bp = 32, 60  # 30 content tokens per chunk, 10 tokens of overlap
    ((_, vec),) = embed_sequences(
        carbon, [seq], pool=pool, max_tokens=max_tokens, chunk_overlap=overlap_bp + 5
    )
    content = _content(carbon, seq)
    plan = chunk_plan(len(content), max_tokens - 2, overlap_bp // 6)
    assert len(plan) > 1
    total, count = torch.zeros(carbon.model.config.hidden_size, dtype=torch.float64), 0
    for c in plan:
        h = _direct(carbon, content[c.start : c.end], -1)
        own = h[1 + c.own - c.start : 1 + c.end - c.start]
        total += own.sum(0)
        count += len(own)
    last = _direct(carbon, content[plan[-1].start : plan[-1].end], -1)
    want = {"mean": total / count, "last": last[-2], "sep": last[-1]}[pool]
    assert count == len(content)
    np.testing.assert_allclose(vec, want.numpy(), atol=ATOL)
    # token-count-weighted mean of the chunk means is the same thing
    if pool == "mean":
        means = [
            (_direct(carbon, content[c.start : c.end], -1)[1 + c.own - c.start : 1 + c.end - c.start])
            for c in plan
        ]
        weighted = sum(m.mean(0) * len(m) for m in means) / sum(len(m) for m in means)
        np.testing.assert_allclose(vec, weighted.numpy(), atol=ATOL)


def test_bad_records_yield_none_and_are_reported(carbon: Carbon) -> None:
    errors: dict[str, str] = {}
    items = [
        SequenceRecord("ok1", _dna(30, 1)),
        BadRecord(1, "dup", "duplicate id 'ok1'"),
        ("empty", "   "),
        SequenceRecord("rna", "ACGUACGUAC"),
    ]
    out = list(embed_sequences(carbon, items, on_error=errors.__setitem__))
    assert [i for i, _ in out] == ["ok1", "dup", "empty", "rna"]
    assert out[1][1] is None and out[2][1] is None and out[0][1] is not None and out[3][1] is not None
    assert errors == {"dup": "duplicate id 'ok1'", "empty": "empty sequence"}
    ((_, dna),) = embed_sequences(carbon, ["ACGTACGTAC"])
    np.testing.assert_allclose(out[3][1], dna, atol=ATOL)  # U is read as T
    with pytest.raises(ValueError, match="exceeds the model's context"):
        embed_sequences(carbon, ["ACGT"], max_tokens=10**6)


def test_batching_does_not_change_results(carbon: Carbon) -> None:
    seqs = [_dna(n, n) for n in (12, 300, 55, 900, 6)]
    one = [v for _, v in embed_sequences(carbon, seqs, batch_size=1)]
    many = [v for _, v in embed_sequences(carbon, seqs, batch_size=8)]
    for a, b in zip(one, many, strict=True):
        np.testing.assert_allclose(a, b, atol=ATOL)


def test_writers(carbon: Carbon, tmp_path: Path) -> None:
    items = [("a", _dna(40, 1)), ("bad", ""), ("c", _dna(80, 2))]
    errors: dict[str, str] = {}
    vectors = list(embed_sequences(carbon, items, on_error=errors.__setitem__))
    hidden = carbon.model.config.hidden_size

    assert write_embeddings(tmp_path / "e.parquet", vectors, errors=errors) == 3
    table = pq.read_table(tmp_path / "e.parquet")
    assert table.column_names == ["id", "embedding", "error"]
    assert str(table.schema.field("embedding").type) == f"fixed_size_list<element: float>[{hidden}]"
    rows = table.to_pylist()
    assert [r["id"] for r in rows] == ["a", "bad", "c"]
    assert rows[1]["embedding"] is None and rows[1]["error"] == "empty sequence"
    np.testing.assert_array_equal(np.array(rows[0]["embedding"], np.float32), vectors[0][1])

    assert write_embeddings(tmp_path / "e.npy", vectors) == 3
    matrix = np.load(tmp_path / "e.npy")
    assert matrix.shape == (3, hidden) and matrix.dtype == np.float32
    assert np.isnan(matrix[1]).all()
    np.testing.assert_array_equal(matrix[2], vectors[2][1])
    assert ids_path(tmp_path / "e.npy").read_text().splitlines() == ["a", "bad", "c"]
    with pytest.raises(ValueError, match=r"\.parquet or \.npy"):
        write_embeddings(tmp_path / "e.csv", vectors)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.ids.txt", "e.npy", "e.parquet"]


def test_bad_chunk_settings(carbon: Carbon) -> None:
    with pytest.raises(ValueError, match="leaves no room for DNA"):
        embed_sequences(carbon, ["ACGT"], max_tokens=2)
    with pytest.raises(ValueError, match="not shorter than a chunk"):
        embed_sequences(carbon, ["ACGT"], max_tokens=12, chunk_overlap=60)
    with pytest.raises(ValueError, match="chunk_overlap must be >= 0"):
        embed_sequences(carbon, ["ACGT"], chunk_overlap=-6)


def test_default_overlap_is_a_quarter_chunk(carbon: Carbon) -> None:
    seq = _dna(600, 11)
    ((_, auto),) = embed_sequences(carbon, [seq], max_tokens=42)  # 40 content tokens a chunk
    ((_, quarter),) = embed_sequences(carbon, [seq], max_tokens=42, chunk_overlap=60)
    ((_, none),) = embed_sequences(carbon, [seq], max_tokens=42, chunk_overlap=0)
    np.testing.assert_array_equal(auto, quarter)
    assert not np.allclose(auto, none)


@pytest.mark.parametrize("pool", ["mean", "last", "sep"])
def test_non_finite_embeddings_are_failed_records(overflow_folder: Path, pool: str) -> None:
    from hexamer.model.finite import non_finite_output

    errors: dict[str, str] = {}
    out = list(
        embed_sequences(
            Carbon.from_pretrained(overflow_folder),
            [("a", "ACGTACGTAGCTAG"), ("b", "TTGACA")],
            pool=pool,  # type: ignore[arg-type]
            on_error=errors.__setitem__,
        )
    )
    assert out == [("a", None), ("b", None)]
    assert errors == {"a": non_finite_output("embedding"), "b": non_finite_output("embedding")}
