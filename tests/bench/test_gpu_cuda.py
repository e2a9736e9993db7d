"""The CUDA path on a real GPU, each against a peer: transformers, the CPU engine, the dynamic
decode step. Marked ``gpu`` and skipped where no CUDA device is present (``pytest -m gpu`` on a
GPU node runs them; ``hexamer bench gpu`` runs the same checks at Carbon's shapes)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from hexamer import Carbon
from hexamer.bench.gpu_checks import F32_LOGIT_TOL, F32_SCORE_TOL, Peers, random_dna_rows

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

VEP_DATA = Path(__file__).resolve().parents[1] / "data" / "vep"
PROMPTS = ["ACGTACGGATTA", "TTGACATTGACAGGCATC" * 3, "CCCCCC" * 5, "GATTACA" * 9]


@pytest.fixture(scope="module")
def peers(tiny_folder: Path) -> Peers:
    return Peers(tiny_folder, torch.device("cuda"), max_batch_size=4)


def test_engine_parity_logits(peers: Peers) -> None:
    pytest.importorskip("transformers")
    layout = peers.carbon("float32").layout
    ids = random_dna_rows(layout, 3, 64, seed=1)
    with torch.inference_mode():
        ours = peers.carbon("float32").model(ids.cuda()).logits.float()
        ref = peers.hf("float32")(ids.cuda()).logits.float()
    assert (ours - ref).abs().max().item() <= F32_LOGIT_TOL


def test_engine_parity_greedy(peers: Peers) -> None:
    pytest.importorskip("transformers")
    from hexamer.bench.gpu_checks import greedy_report

    report = greedy_report(peers, PROMPTS, 16)
    assert all(row["pass"] for row in report.rows), report.rows


def _tokens(carbon: Carbon, **sampling: object) -> list[list[int]]:
    return [g.token_ids for g in carbon.generate(PROMPTS, max_new_tokens=16, mode="token", **sampling)]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_static_decode_same_tokens(tiny_folder: Path, dtype: str) -> None:
    dynamic = Carbon.from_pretrained(
        tiny_folder, device="cuda", dtype=dtype, max_batch_size=4, static_decode=False
    )
    static = Carbon.from_pretrained(
        tiny_folder, device="cuda", dtype=dtype, max_batch_size=4, static_decode=True
    )
    assert static.engine.runner.static_decode
    assert _tokens(static, temperature=0) == _tokens(dynamic, temperature=0)
    assert _tokens(static, seed=3) == _tokens(dynamic, seed=3)


def test_cuda_graphs_same_tokens(tiny_folder: Path) -> None:
    dynamic = Carbon.from_pretrained(
        tiny_folder, device="cuda", dtype="bfloat16", max_batch_size=4, static_decode=False
    )
    graphs = Carbon.from_pretrained(
        tiny_folder, device="cuda", dtype="bfloat16", max_batch_size=4, compile_decode=True
    )
    assert _tokens(graphs, temperature=0) == _tokens(dynamic, temperature=0)
    assert _tokens(graphs, seed=3) == _tokens(dynamic, seed=3)


def test_bf16_scoring_close_to_the_cpu(tiny_folder: Path) -> None:
    seqs = ["ACGT" * 60, "GATTACA" * 40, "CCGGTTAA" * 30]
    cpu = Carbon.from_pretrained(tiny_folder).score(seqs)
    f32 = Carbon.from_pretrained(tiny_folder, device="cuda", dtype="float32").score(seqs)
    bf16 = Carbon.from_pretrained(tiny_folder, device="cuda", dtype="bfloat16").score(seqs)
    for ref, exact, rounded in zip(cpu, f32, bf16, strict=True):
        assert abs(exact.mean - ref.mean) <= F32_SCORE_TOL
        assert rounded.status == "ok" and abs(rounded.mean - ref.mean) <= 0.05
        assert np.nanmax(np.abs(rounded.per_base - ref.per_base)) <= 0.5


def test_vep_path_on_cuda(tiny_folder: Path) -> None:
    pytest.importorskip("pysam")  # VCF reading
    from hexamer.vep.scoring import score_variants

    fasta = VEP_DATA / "chr20_slice.fa.gz"

    def rows(carbon: Carbon) -> list[dict]:
        return list(
            score_variants(carbon, VEP_DATA / "chr20_slice.vcf", fasta, window=600, on_note=lambda _: None)
        )

    cpu = rows(Carbon.from_pretrained(tiny_folder))
    gpu = rows(Carbon.from_pretrained(tiny_folder, device="cuda", dtype="float32"))
    assert [(r["record"], r["alt_index"], r["status"]) for r in gpu] == [
        (r["record"], r["alt_index"], r["status"]) for r in cpu
    ]
    scored = [(g["score"], c["score"]) for g, c in zip(gpu, cpu, strict=True) if c["status"] == "ok"]
    assert scored and max(abs(g - c) for g, c in scored) <= 1e-3
