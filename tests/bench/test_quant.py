"""``hexamer bench quant`` and ``hexamer quantize``: every variant gets a row, float32 is the
reference of every ratio, the llama.cpp peer is a skipped row with a reason when absent, and the
fidelity measures are 0 for float32 and small for int8 of the same weights."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hexamer.bench.quant import DNA_DIR, check_variants, held_out_dna, load_variants, run_quant_fidelity
from hexamer.model.quant import QUANT_METHOD, folder_quantization
from hexamer.testing.cli import run, run_json, run_ok


def _ok(args: list[str]) -> str:
    result = run_ok(args)
    return result.output


def test_variants_are_checked_and_float32_comes_first() -> None:
    assert check_variants(["int8", "bfloat16", "int8"]) == ("float32", "int8", "bfloat16")
    assert check_variants(["int4", "int8-a8"]) == ("float32", "int4", "int8-a8")
    with pytest.raises(ValueError, match="int3"):
        check_variants(["int3"])


def test_held_out_windows_are_acgt_and_deterministic() -> None:
    windows = held_out_dna(120, 9, seed=3)
    assert len(windows) == 9 and all(len(s) == 120 and set(s) <= set("ACGT") for _, s in windows)
    assert windows == held_out_dna(120, 9, seed=3)
    n_sequences = len(list(DNA_DIR.glob("*.fa.gz")))
    assert len({name.split(":")[0] for name, _ in windows}) == min(9, n_sequences)  # each takes its turn


def test_fidelity_of_float32_is_exact_and_int8_is_close(tiny_folder: Path) -> None:
    carbons = load_variants(tiny_folder, ("float32", "int8"), 4, lambda _: None)
    report = run_quant_fidelity(carbons, model_name="tiny", n_variants=12, n_windows=6, window_bp=60)
    rows = {r["variant"]: r for r in report.rows}
    assert set(rows) == {"float32", "int8"} and all(r["status"] == "ok" for r in rows.values())
    assert rows["float32"]["Spearman vs fp32"] == 1.0 and rows["float32"]["|Δ log P| max"] == 0
    assert rows["int8"]["|Δ log P| max"] > 0  # really quantized
    assert rows["int8"]["Spearman vs fp32"] > 0.9 and rows["int8"]["n_bases"] == 12 * 60 + 12 * 60


def test_bench_quant_speed_json(tiny_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "q.json"
    _ok(
        ["bench", "quant", "--model", str(tiny_folder), "--threads", "1", "--rounds", "1",
         "--batch-sizes", "1,2", "--prompt-bp", "24", "--new-bp", "12", "--variants", "int8,bfloat16",
         "--json", str(out)]
    )  # fmt: skip
    rows = json.loads(out.read_text())["rows"]
    ours = [r for r in rows if r["variant"] != "llama.cpp Q8_0"]
    assert {(r["variant"], r["batch"]) for r in ours} == {
        (v, b) for v in ("float32", "int8", "bfloat16") for b in (1, 2)
    }
    assert all(r["status"] == "ok" and r["decode step ms"] > 0 for r in ours)
    assert all(r["× float32"] == 1.0 for r in ours if r["variant"] == "float32")
    peer = [r for r in rows if r["variant"] == "llama.cpp Q8_0"]
    assert len(peer) == 2 and all(r["status"] == "skipped" and r["reason"] for r in peer)


def test_bench_quant_fidelity_json(tiny_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "f.json"
    _ok(
        ["bench", "quant", "--fidelity", "--model", str(tiny_folder), "--threads", "1",
         "--variants", "int8-bf16", "--n-variants", "6", "--n-windows", "4", "--window-bp", "48",
         "--json", str(out)]
    )  # fmt: skip
    rows = json.loads(out.read_text())["rows"]
    assert [r["variant"] for r in rows] == ["float32", "int8-bf16", "llama.cpp Q8_0"]
    assert 0 <= rows[1]["|Δscore| max"] < 1 and rows[1]["AUROC"] is not None
    assert rows[2]["status"] == "skipped" and "--gguf-quantize q8_0" in rows[2]["reason"]


def test_quantize_command_writes_a_loadable_folder(tiny_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "q"
    summary = run_json(["quantize", str(tiny_folder), str(out), "--json"])
    assert folder_quantization(out)["quant_method"] == QUANT_METHOD  # type: ignore[index]
    assert summary["out_bytes"] < summary["source_bytes"]
    result = run(["quantize", str(out), str(tmp_path / "again")])
    assert result.exit_code == 2 and not (tmp_path / "again").exists()  # a usage error
    result = run(["quantize", str(tiny_folder), str(tmp_path / "x"), "--dtype", "int2"])
    assert result.exit_code != 0 and not (tmp_path / "x").exists()
    four = run_json(["quantize", str(tiny_folder), str(tmp_path / "q4"), "--dtype", "int4", "--json"])
    assert folder_quantization(tmp_path / "q4")["bits"] == 4  # type: ignore[index]
    assert four["out_bytes"] < summary["out_bytes"]


def test_llama_cpp_peer_is_timed_when_installed_and_given_a_gguf(
    tiny_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The peer's plumbing, with a stand-in for llama.cpp (not installed on the test machines)."""
    from hexamer.bench import llamacpp
    from hexamer.bench.quant import LLAMA_CPP_NAME, run_quant_speed

    class FakeLlamaCpp:
        def __init__(self, folder: Path, *, gguf_path: Path, n_threads: int) -> None:
            assert gguf_path.is_file() and n_threads >= 1

        def generate(self, prompts: list[str], new_bp: int, *, batch: int) -> tuple[list[str], object]:
            assert batch == len(prompts) and all(len(p) % 6 == 0 for p in prompts)
            return ["A" * new_bp] * len(prompts), llamacpp.GenerationTimings(
                step_s=[0.002] * 3, prefill_s=0.01
            )

    monkeypatch.setattr(llamacpp, "llama_cpp_available", lambda: (True, ""))
    monkeypatch.setattr(llamacpp, "LlamaCppBackend", FakeLlamaCpp)
    gguf = tmp_path / "m.q8_0.gguf"
    gguf.write_bytes(b"GGUF")
    carbons = load_variants(tiny_folder, ("float32",), 2, lambda _: None)
    report = run_quant_speed(
        carbons, batch_sizes=(2,), prompt_bp=24, new_bp=12, rounds=1, ggufs={"q8_0": gguf}, folder=tiny_folder
    )
    peer = next(r for r in report.rows if r["variant"] == LLAMA_CPP_NAME)
    assert peer["status"] == "ok" and peer["decode step ms"] == pytest.approx(2.0)
    no_gguf = run_quant_speed(
        carbons, batch_sizes=(2,), prompt_bp=24, new_bp=12, rounds=1, folder=tiny_folder
    )
    peer = next(r for r in no_gguf.rows if r["variant"] == LLAMA_CPP_NAME)
    assert peer["status"] == "skipped" and "--gguf" in peer["reason"]
    several = run_quant_speed(
        carbons, batch_sizes=(2,), prompt_bp=24, new_bp=12, rounds=1,
        ggufs={"q4_k_m": gguf, "q4_0": gguf, "q8_0": None}, folder=tiny_folder,
    )  # fmt: skip
    rows = {r["variant"]: r for r in several.rows}
    assert rows["llama.cpp Q4_K_M"]["status"] == "ok" and rows["llama.cpp Q4_0"]["status"] == "ok"
    assert rows["llama.cpp Q8_0"]["status"] == "skipped"


def test_peer_gguf_is_checked_before_any_work(
    tiny_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hexamer.bench import quant

    gguf = tmp_path / "m.q8_0.gguf"
    with pytest.raises(ValueError, match="not found"):
        quant.check_peer_gguf(gguf, None)
    gguf.write_bytes(b"GGUF")
    with pytest.raises(ValueError, match="not both"):
        quant.check_peer_gguf(gguf, ["q8_0"])
    with pytest.raises(ValueError, match="q4_k_s"):
        quant.check_peer_gguf(None, ["q4_0", "q4_k_s"])
    assert quant.peer_ggufs(tiny_folder, gguf, None) == {"q8_0": gguf}
    assert quant.peer_ggufs(tiny_folder, None, None) == {"q8_0": None}
    # without llama.cpp the folder is not converted: the rows are skipped with the install hint
    monkeypatch.setattr("hexamer.bench.llamacpp.llama_cpp_available", lambda: (False, "not installed"))
    assert quant.peer_ggufs(tiny_folder, None, ["q8_0", "q4_0"]) == {"q8_0": None, "q4_0": None}
    result = run(
        ["bench", "quant", "--model", str(tiny_folder), "--gguf", str(gguf), "--gguf-quantize", "q8_0"]
    )
    assert result.exit_code != 0


def test_fidelity_scores_a_peer_row_and_reports_a_missing_or_failing_one(tiny_folder: Path) -> None:
    """The llama.cpp row's plumbing, with float32 hexamer standing in for the peer: a peer that
    computes the same numbers has zero drift, a missing one is a skipped row with the reason and a
    failing one a failed row (the other rows are kept)."""
    import numpy as np

    from hexamer.bench.quant import LLAMA_CPP_HINT

    carbons = load_variants(tiny_folder, ("float32",), 4, lambda _: None)

    def same(seqs: list[str]) -> list[np.ndarray]:
        return [np.asarray(r.per_base) for r in carbons["float32"].score(seqs, level="bp")]

    report = run_quant_fidelity(
        carbons, model_name="tiny", n_variants=6, n_windows=4, window_bp=48, peers={"llama.cpp Q8_0": same}
    )
    rows = {r["variant"]: r for r in report.rows}
    assert rows["llama.cpp Q8_0"]["status"] == "ok" and rows["llama.cpp Q8_0"]["|Δ log P| max"] == 0
    skipped = run_quant_fidelity(
        carbons, model_name="tiny", n_variants=6, n_windows=4, window_bp=48,
        peers_skipped={"llama.cpp Q8_0": LLAMA_CPP_HINT},
    )  # fmt: skip
    assert skipped.rows[-1] == {"variant": "llama.cpp Q8_0", "status": "skipped", "reason": LLAMA_CPP_HINT}

    def broken(seqs: list[str]) -> list:
        raise RuntimeError("llama_decode failed with code 1")

    failed = run_quant_fidelity(
        carbons,
        model_name="tiny",
        n_variants=6,
        n_windows=4,
        window_bp=48,
        peers={"llama.cpp Q4_K_M": broken},
    )
    assert [r["status"] for r in failed.rows] == ["ok", "failed"] and "code 1" in failed.rows[-1]["reason"]


def test_bench_quant_fidelity_without_llama_cpp_has_a_skipped_row_with_the_hint(
    tiny_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hexamer.bench import llamacpp
    from hexamer.bench.quant import LLAMA_CPP_HINT

    monkeypatch.setattr(llamacpp, "llama_cpp_available", lambda: (False, "llama-cpp-python is not installed"))
    out = tmp_path / "f.json"
    _ok(
        ["bench", "quant", "--fidelity", "--model", str(tiny_folder), "--threads", "1", "--variants", "int8",
         "--n-variants", "4", "--n-windows", "2", "--window-bp", "24", "--gguf-quantize", "q8_0",
         "--json", str(out)]
    )  # fmt: skip
    rows = json.loads(out.read_text())["rows"]
    assert [r["variant"] for r in rows] == ["float32", "int8", "llama.cpp Q8_0"]
    assert rows[-1]["status"] == "skipped" and rows[-1]["reason"] == LLAMA_CPP_HINT


def test_fidelity_of_int4_and_int8_activations(tiny_folder: Path) -> None:
    carbons = load_variants(tiny_folder, ("float32", "int8-a8", "int4"), 4, lambda _: None)
    report = run_quant_fidelity(carbons, model_name="tiny", n_variants=12, n_windows=6, window_bp=60)
    rows = {r["variant"]: r for r in report.rows}
    assert set(rows) == {"float32", "int8-a8", "int4"} and all(r["status"] == "ok" for r in rows.values())
    for v in ("int8-a8", "int4"):
        assert rows[v]["|Δ log P| max"] > 0 and rows[v]["Spearman vs fp32"] > 0.9
