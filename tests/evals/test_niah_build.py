"""The Genome-NIAH builder: layout of the planted pairs, decoys, lengths, determinism, CLI."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from hexamer.evals.niah_build import (
    DEFAULT_GENOME,
    NiahBuildConfig,
    build_cell,
    build_niah,
    hamming,
    load_genome,
    parse_ctx_list,
    parse_depths,
    prompt_length_bp,
)
from hexamer.evals.tasks.niah import GenomeNiah
from hexamer.evals.tasks.niah_cells import cell_name, parse_cell
from hexamer.testing.cli import error_message, run, run_ok


@pytest.fixture(scope="module")
def genome():
    return load_genome(DEFAULT_GENOME)


def _independent_checks(row: dict, cfg: NiahBuildConfig, task: str, ctx: int, human: str) -> None:
    prompt, key, value = row["prompt"], row["key"], row["value"]
    assert len(key) == cfg.key_len and len(value) == cfg.value_len and row["value_len_bp"] == 24
    assert set(key) <= set("ACGT") and set(value) <= set("ACGT")
    # <dna> + prompt + value is exactly ctx tokens, and the prompt is whole 6-mers
    assert len(prompt) % 6 == 0
    assert 1 + len(prompt) // 6 + len(value) // 6 == ctx == row["context_length_tokens"]
    assert prompt.endswith(key)
    assert row["positive_sequence"] == prompt + value
    neg = row["negative_sequence"]
    assert neg.startswith(prompt) and len(neg) == len(prompt) + 24 and neg[len(prompt) :] != value
    # the planted pair: at its stated depth, on a 6-mer boundary, the key nowhere else
    pos = row["needle_pos_bp"]
    assert prompt[pos : pos + 48] == key + value and pos % 6 == 0
    hay = len(prompt) - 24
    assert abs(pos / (hay - 48) - row["depth"]) <= 6 / (hay - 48)
    assert prompt.count(key) == 2
    # decoys: exactly X mismatches, distinct from each other and from the key, planted where stated
    x = int(task.removeprefix("neardup_d")) if task != "niah" else 0
    keys = row["distractor_keys"]
    assert len(keys) == (cfg.n_distractors if x else 0)
    assert all(hamming(k, key) == x for k in keys)
    assert len(set(keys)) == len(keys) and key not in keys
    spans = [(pos, pos + 48)]
    for k, v, at in zip(keys, row["distractor_values"], row["distractor_pos_bp"], strict=True):
        assert prompt[at : at + 48] == k + v and at % 6 == 0 and v != value
        spans.append((at, at + 48))
    spans.sort()
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))  # no overlaps
    # the rest of the haystack is real genome: remove the planted pairs, find it in the slice
    background = prompt[:-24]
    for a, b in reversed(spans):
        background = background[:a] + background[b:]
    assert background in human


def test_rows_layout(genome) -> None:
    human = genome.seqs[0]
    cfg = NiahBuildConfig(ctx=(128, 300), n=10, seed=7)
    for task in ("niah", "neardup_d4", "neardup_d2", "neardup_d1"):
        for ctx in cfg.ctx:
            rows = list(build_cell(cfg, [genome], task, ctx))
            assert [r["depth"] for r in rows] == [0.10, 0.25, 0.50, 0.75, 0.90] * 2
            assert len({r["uid"] for r in rows}) == 10
            assert all(r["uid"].startswith(cell_name(task, ctx)) for r in rows)
            for r in rows:
                _independent_checks(r, cfg, task, ctx, human)


def test_determinism_and_prefix_stability(genome) -> None:
    a = list(build_cell(NiahBuildConfig(n=4, seed=1), [genome], "neardup_d2", 128))
    b = list(build_cell(NiahBuildConfig(n=4, seed=1), [genome], "neardup_d2", 128))
    c = list(build_cell(NiahBuildConfig(n=4, seed=2), [genome], "neardup_d2", 128))
    longer = list(build_cell(NiahBuildConfig(n=6, seed=1), [genome], "neardup_d2", 128))
    assert a == b
    assert [r["key"] for r in a] != [r["key"] for r in c]
    assert longer[:4] == a


def test_stitched_haystack_from_runs(tmp_path: Path, genome) -> None:
    """A genome cut by N gaps into runs: stitched haystacks join runs (N never enters the prompt);
    contiguous ones need a single run long enough and say so when there is none."""
    human = genome.seqs[0]
    rng = random.Random(0)
    parts = [human[i * 3000 : i * 3000 + 2500] for i in range(8)]
    fasta = tmp_path / "gappy.fa"
    seq = ("N" * 50).join(p.lower() if i % 2 else p for i, p in enumerate(parts))  # soft-masked too
    fasta.write_text(">chrA gappy\n" + "\n".join(seq[i : i + 60] for i in range(0, len(seq), 60)) + "\n")
    g = load_genome(fasta)
    assert len(g.runs) == 8 and g.acgt_bp == 8 * 2500
    cfg = NiahBuildConfig(ctx=(700,), n=3, seed=rng.randrange(100), stitch_from=512, fasta=(str(fasta),))
    rows = list(build_cell(cfg, [g], "niah", 700))
    for r in rows:
        assert r["haystack"] == "stitched" and set(r["prompt"]) <= set("ACGT")
        assert len(r["prompt"]) == prompt_length_bp(700)
    contiguous = NiahBuildConfig(ctx=(700,), n=1, stitch_from=4096)
    with pytest.raises(ValueError, match="no A/C/G/T run"):
        list(build_cell(contiguous, [g], "niah", 700))


def test_bad_inputs(genome) -> None:
    with pytest.raises(ValueError, match="too short"):
        list(build_cell(NiahBuildConfig(n=1), [genome], "neardup_d2", 64))
    with pytest.raises(ValueError, match="unknown NIAH task"):
        NiahBuildConfig(tasks=("neardup",))
    with pytest.raises(ValueError, match="multiple of 6"):
        NiahBuildConfig(key_len=20)
    with pytest.raises(ValueError, match="stitched haystack needs"):  # 100 kbp slice, 64k tokens
        list(build_cell(NiahBuildConfig(n=1), [genome], "niah", 65536))
    assert parse_ctx_list("4k, 8k,256") == (4096, 8192, 256)
    assert parse_depths("10,25,50") == (0.1, 0.25, 0.5)
    assert parse_depths("0.5") == (0.5,)


def test_files_in_public_schema_read_by_task(tmp_path: Path) -> None:
    cfg = NiahBuildConfig(ctx=(128, 256), tasks=("niah", "neardup_d2"), n=5, seed=3)
    paths = build_niah(cfg, tmp_path / "genome-niah")
    assert sorted(p.parent.name for p in paths) == sorted(
        ["niah_128", "niah_256", "niah_neardup_d2_128", "niah_neardup_d2_256"]
    )
    names = pq.ParquetFile(paths[0]).schema_arrow.names
    for col in GenomeNiah.expected_columns:
        assert col in names
    assert (tmp_path / "genome-niah" / "manifest.json").is_file()
    ex = GenomeNiah().load(tmp_path / "genome-niah")
    assert len(ex) == 20
    assert {(e["task"], e["ctx"]) for e in ex} == {
        ("niah", 128),
        ("niah", 256),
        ("neardup_d2", 128),
        ("neardup_d2", 256),
    }
    assert all(parse_cell(e["config"]) == (e["task"], e["ctx"]) for e in ex)
    assert all(e["neg_value"] and len(e["neg_value"]) == 24 for e in ex)
    # same seed, same bytes of data
    again = build_niah(cfg, tmp_path / "again")
    for p, q in zip(paths, again, strict=True):
        assert pq.read_table(p).equals(pq.read_table(q))


def test_cli(tmp_path: Path) -> None:
    out = tmp_path / "cells"
    run_ok(
        [
            "build-niah",
            "--out",
            str(out),
            "--ctx",
            "128",
            "--tasks",
            "niah,neardup_d1",
            "--n",
            "3",
            "--seed",
            "42",
            "--depths",
            "50",
        ]
    )
    assert (out / "niah_128" / "test.parquet").is_file()
    rows = pq.read_table(out / "niah_neardup_d1_128" / "test.parquet").to_pylist()
    assert len(rows) == 3 and all(r["depth"] == 0.5 and r["hamming"] == 1 for r in rows)
    bad = run(["build-niah", "--out", str(out), "--ctx", "64", "--tasks", "neardup_d2", "--n", "1"])
    assert bad.exit_code == 2 and "too short" in error_message(bad)
