"""llama.cpp peer: conversion plumbing, the parity gate and sampling are tested without llama.cpp;
the end-to-end checks (convert, tokenize, logits, generate) run only where llama-cpp-python and the
converter are present, and are marked slow (the converter takes ~20 s even on a tiny model)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from hexamer.bench import llamacpp
from hexamer.bench.llamacpp import (
    LlamaCppBackend,
    ParityError,
    ParityReport,
    compare_logits,
    convert_to_gguf,
    converter_command,
    default_gguf_path,
    find_converter,
    quantize_gguf,
    sample_rows,
    top1_agreement,
    top1_margins,
)
from hexamer.bench.llamacpp.tokenizer import _ConverterTokenizer
from hexamer.synthetic import build_carbon_folder


def _fake_tree(root: Path) -> Path:
    (root / "gguf-py" / "gguf").mkdir(parents=True)
    (root / "convert_hf_to_gguf.py").write_text("raise SystemExit('not run in tests')\n")
    return root


# ------------------------------------------------------------------ conversion plumbing
def test_converter_command_runs_our_entry_with_the_converter(tmp_path: Path) -> None:
    cmd = converter_command(tmp_path / "m", tmp_path / "m.gguf", "bf16", tmp_path / "convert_hf_to_gguf.py")
    assert cmd[:4] == [sys.executable, "-m", "hexamer.bench.llamacpp", "_convert"]
    assert cmd[4:] == [
        str(tmp_path / "convert_hf_to_gguf.py"),
        str(tmp_path / "m"),
        "--outfile",
        str(tmp_path / "m.gguf"),
        "--outtype",
        "bf16",
    ]
    with pytest.raises(ValueError, match="outtype"):
        converter_command(tmp_path, tmp_path / "x", "q4_0", tmp_path / "c.py")


def test_find_converter_accepts_checkout_and_sdist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checkout = _fake_tree(tmp_path / "llama.cpp")
    assert find_converter(checkout) == checkout / "convert_hf_to_gguf.py"
    sdist = tmp_path / "llama_cpp_python-0.3.36"
    _fake_tree(sdist / "vendor" / "llama.cpp")
    monkeypatch.setenv("HEXAMER_LLAMA_CPP_DIR", str(sdist))
    assert find_converter() == sdist / "vendor" / "llama.cpp" / "convert_hf_to_gguf.py"
    monkeypatch.setenv("HEXAMER_LLAMA_CPP_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="HEXAMER_LLAMA_CPP_DIR"):
        find_converter()


def test_find_converter_looks_in_the_hexamer_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HEXAMER_LLAMA_CPP_DIR", raising=False)
    monkeypatch.setenv("HEXAMER_CACHE", str(tmp_path))
    tree = _fake_tree(tmp_path / "llama_cpp_python-0.3.36" / "vendor" / "llama.cpp")
    assert find_converter() == tree / "convert_hf_to_gguf.py"


def test_fresh_cached_gguf_is_reused_without_a_converter(
    tiny_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HEXAMER_LLAMA_CPP_DIR", str(tmp_path / "nowhere"))
    out = tmp_path / "cached.gguf"
    out.write_bytes(b"GGUF")
    future = time.time() + 60
    os.utime(out, (future, future))
    assert convert_to_gguf(tiny_folder, out, "f32") == out
    os.utime(out, (0, 0))  # older than the folder: must convert again, and no converter is found
    with pytest.raises(FileNotFoundError, match=r"convert_hf_to_gguf\.py"):
        convert_to_gguf(tiny_folder, out, "f32")
    assert default_gguf_path(tiny_folder, "bf16") == tiny_folder.resolve().parent / "model.bf16.gguf"
    with pytest.raises(FileNotFoundError, match=r"config\.json"):
        convert_to_gguf(tmp_path, out, "f32")


def test_quantize_gguf_checks_its_inputs_and_reuses_a_fresh_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src, out = tmp_path / "m.f32.gguf", tmp_path / "m.q8_0.gguf"
    with pytest.raises(ValueError, match="q4_k"):
        quantize_gguf(src, out, "q4_k")
    assert llamacpp.quantize.check_quant_type("q4_k_m") == "q4_k_m"  # llama.cpp's usual 4-bit CPU pick
    with pytest.raises(FileNotFoundError, match=r"m\.f32\.gguf"):
        quantize_gguf(src, out)
    src.write_bytes(b"GGUF")
    out.write_bytes(b"GGUF")
    future = time.time() + 60
    os.utime(out, (future, future))
    monkeypatch.setattr(llamacpp.quantize, "llama_cpp_available", lambda: (False, "not installed here"))
    assert quantize_gguf(src, out) == out  # newer than its source: llama.cpp is not needed
    os.utime(out, (0, 0))
    with pytest.raises(RuntimeError, match="not installed here"):
        quantize_gguf(src, out)
    assert not list(tmp_path.glob(".*.tmp"))


def test_converter_tokenizer_matches_what_the_converter_reads(tmp_path: Path) -> None:
    folder = build_carbon_folder(tmp_path / "real", bpe="qwen3", weights=False)
    tok = _ConverterTokenizer(folder)
    assert len(tok.vocab) == 155_775  # CCCCCC: the BPE id wins, as in the official get_vocab()
    assert tok.vocab["CCCCCC"] == 91443 and tok.dna_token_to_id["CCCCCC"] == 154402
    assert len(tok.kmers) == 4096 and tok.kmers[0] == "AAAAAA"
    added = tok.get_added_vocab()
    assert added["<dna>"] == 151669 and added["<oov>"] == 151671 and added["<|endoftext|>"] == 151643
    assert tok.added_tokens_decoder[151669].special and not tok.added_tokens_decoder[added["<think>"]].special
    assert tok.encode("<dna>CCCCCC</dna>") == [151669, 154402, 151670]


def test_convert_entry_runs_the_converter_with_hexamers_tokenizer(tiny_folder: Path, tmp_path: Path) -> None:
    """``python -m hexamer.bench.llamacpp _convert`` (what :func:`converter_command` runs) hands the
    converter hexamer's tokenizer for a HybridDNATokenizer folder and passes its arguments through."""
    import subprocess

    converter = _fake_tree(tmp_path / "llama.cpp") / "convert_hf_to_gguf.py"
    converter.write_text(
        "import sys\n"
        "from transformers import AutoTokenizer\n"
        "tok = AutoTokenizer.from_pretrained(sys.argv[1])\n"
        "open(sys.argv[sys.argv.index('--outfile') + 1], 'w').write(f'{type(tok).__name__} {len(tok.kmers)}')\n"
    )
    out = tmp_path / "out.txt"
    proc = subprocess.run(
        converter_command(tiny_folder, out, "f32", converter), capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert out.read_text() == "_ConverterTokenizer 4096"


# ------------------------------------------------------------------ parity logic
def test_compare_logits_on_synthetic_arrays() -> None:
    rng = np.random.default_rng(0)
    ref = rng.normal(size=(5, 40)).astype(np.float32)
    other = ref.copy()
    other[2, 7] += 0.25
    stats = compare_logits(ref, other, (10, 30))
    assert stats["max_abs_diff"] == pytest.approx(0.25, rel=1e-6)
    assert stats["max_abs_logit"] == pytest.approx(float(np.abs(ref).max()))
    assert stats["top1"] == 1.0  # the perturbed column is outside the 6-mer rows
    swapped = ref.copy()
    swapped[0, 10:30] = swapped[0, 10:30][::-1]
    assert compare_logits(ref, swapped, (10, 30))["top1"] == pytest.approx(0.8)
    with pytest.raises(ValueError, match="shapes"):
        compare_logits(ref, ref[:, :3], (0, 3))


def test_top1_agreement_counts_near_ties() -> None:
    # row 0: exact agreement; row 1: a near-tie the other engine breaks the other way;
    # row 2: a real disagreement (llama.cpp's pick is far below hexamer's best)
    ref = np.array([[3.0, 1.0, 0.0, -1.0], [1.0, 0.9995, 0.2, 0.0], [2.0, 0.0, 0.5, 0.1]])
    other = np.array([[3.0001, 1.0, 0.0, -1.0], [0.9996, 1.0004, 0.2, 0.0], [0.0, 2.0, 0.5, 0.1]])
    assert top1_margins(ref, other) == pytest.approx([0.0, 0.0005, 2.0])
    assert top1_agreement(ref[:1], other[:1], tie_tol=1e-3) == (1.0, 1.0)
    assert top1_agreement(ref[1:2], other[1:2], tie_tol=1e-3) == (0.0, 1.0)  # flip within tolerance
    assert top1_agreement(ref[1:2], other[1:2]) == (0.0, 0.0)  # tie_tol 0: the raw argmax test
    assert top1_agreement(ref[2:], other[2:], tie_tol=1e-3) == (0.0, 0.0)  # not a tie: still a miss
    raw, tie_aware = top1_agreement(ref, other, tie_tol=1e-3)
    assert raw == pytest.approx(1 / 3) and tie_aware == pytest.approx(2 / 3)
    assert top1_agreement(ref, other, tie_tol=5.0) == pytest.approx((1 / 3, 1.0))
    with pytest.raises(ValueError, match="tie_tol"):
        top1_agreement(ref, other, tie_tol=-1.0)
    with pytest.raises(ValueError, match="shapes"):
        top1_margins(ref, other[:, :3])
    stats = compare_logits(ref, other, (0, 4))
    assert stats["top1"] == pytest.approx(1 / 3) and stats["flip_margins"] == pytest.approx([0.0005, 2.0])


def _report(**over: object) -> ParityReport:
    base = dict(
        outtype="f32",
        n_prompts=4,
        ids_equal=4,
        positions=100,
        max_abs_diff=1e-4,
        max_abs_logit=2.0,
        top1_agreement=1.0,
        top1_agreement_full=1.0,
    )
    return ParityReport(**(base | over))  # type: ignore[arg-type]


def test_parity_gate() -> None:
    assert _report().check().relative_diff == pytest.approx(5e-5)
    with pytest.raises(ParityError, match="token ids differ on 1 of 4"):
        _report(ids_equal=3).check()
    with pytest.raises(ParityError, match="max \\|logit diff\\|"):
        _report(max_abs_diff=0.5).check()
    with pytest.raises(ParityError, match="top-1"):
        _report(top1_agreement=0.5).check()
    _report(outtype="bf16", max_abs_diff=0.05).check()  # bf16 tolerance is looser
    with pytest.raises(ParityError):
        _report(max_abs_diff=float("nan")).check()
    assert "ids equal on 4/4" in _report(greedy_tokens=8, greedy_match=8).summary()


def test_parity_gate_forgives_near_ties_only() -> None:
    # 5 of 100 positions flipped (95% raw < 97%): near-ties pass, real disagreements do not
    near = _report(top1_agreement=0.95, flip_margins=[1e-4] * 5)
    assert near.tie_tolerance() == pytest.approx(2e-3 * 2.0)  # f32 tolerance x max |logit|
    assert near.top1_agreement_tie_aware() == pytest.approx(1.0)
    near.check()
    summary = near.summary()
    assert "95.0% raw" in summary and "100.0% tie-aware" in summary
    far = _report(top1_agreement=0.95, flip_margins=[1e-4, 1e-4, 0.3, 0.4, 0.5])
    assert far.top1_agreement_tie_aware() == pytest.approx(0.97)
    far.check()  # 97% tie-aware is just enough
    worse = _report(top1_agreement=0.94, flip_margins=[1e-4, 0.2, 0.3, 0.4, 0.5, 0.6])
    with pytest.raises(ParityError, match=r"95\.0% < 97% .*\(94\.0% raw\)"):
        worse.check()
    # the tie tolerance follows the gate's own tolerances
    worse.check({"f32": (0.2, 0.97)})


def test_sample_rows() -> None:
    logits = np.array([[0.0, 5.0, 1.0], [3.0, 0.0, 0.0]])
    rngs = [np.random.default_rng(i) for i in range(2)]
    assert sample_rows(logits, 0.0, rngs).tolist() == [1, 0]
    # row i depends only on rngs[i]
    a = sample_rows(logits, 1.0, [np.random.default_rng(5), np.random.default_rng(6)])
    b = sample_rows(logits[::-1], 1.0, [np.random.default_rng(6), np.random.default_rng(5)])
    assert a.tolist() == b[::-1].tolist()
    # the empirical distribution follows softmax(logits / T)
    draws = 20_000
    rng = [np.random.default_rng(1)] * draws
    row = np.log(np.array([[0.1, 0.2, 0.7]]))
    counts = np.bincount(sample_rows(np.repeat(row, draws, 0), 1.0, rng), minlength=3) / draws
    assert np.allclose(counts, [0.1, 0.2, 0.7], atol=0.015)
    hot = np.bincount(sample_rows(np.repeat(row, draws, 0), 0.5, rng), minlength=3) / draws
    assert np.allclose(hot, np.array([0.01, 0.04, 0.49]) / 0.54, atol=0.015)


def test_backend_reports_missing_llama_cpp(tiny_folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = llamacpp.convert.importlib.util.find_spec
    monkeypatch.setattr(
        llamacpp.convert.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "llama_cpp" else real(name, *a),
    )
    backend = LlamaCppBackend(tiny_folder)
    ok, why = backend.available()
    assert not ok and "hexamer[bench]" in why
    with pytest.raises(RuntimeError, match="not installed"):
        backend.load()
    with pytest.raises(ValueError, match="dtype"):
        LlamaCppBackend(tiny_folder, dtype="int8")
    with pytest.raises(ValueError, match="kv_type"):
        LlamaCppBackend(tiny_folder, kv_type="q4")


def test_bench_times_every_backend_per_batch_with_a_stand_in_peer(
    tiny_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bench's rounds, rows and notes, with a stand-in for llama.cpp (no peer needed)."""
    from types import SimpleNamespace

    from hexamer.bench.llamacpp import run as run_module

    calls: list[tuple[int, int]] = []

    class Peer:
        outtype = "f32"

        def __init__(self, folder: Path, **_: object) -> None:
            self.folder, self.closed = folder, False

        def available(self) -> tuple[bool, str]:
            return True, ""

        def load(self) -> None:
            pass

        def check_parity(self, carbon: object, prompts: list[str], **_: object) -> object:
            return SimpleNamespace(
                summary=lambda: "parity (stand-in)", documented=["doc"], check=lambda: None
            )

        def generate(self, items: list[str], bp: int, *, batch: int, **_: object) -> tuple[None, object]:
            calls.append((len(items), bp))
            return None, SimpleNamespace(prefill_s=0.01, step_s=[0.002, 0.004])

        def close(self) -> None:
            pass

    monkeypatch.setattr(run_module, "LlamaCppBackend", Peer)
    lines: list[str] = []
    report = llamacpp.run_llamacpp_bench(
        folder=tiny_folder, batch_sizes=(1, 2), prompt_bp=24, new_bp=12, repeats=2,
        hexamer_modes=("token", "bp"), threads=1, log=lines.append,
    )  # fmt: skip
    assert [(r["backend"], r["batch"]) for r in report.rows] == [
        (b, n) for n in (1, 2) for b in ("hexamer token level", "hexamer bp level", "llama.cpp")
    ]
    assert calls == [(1, 12), (1, 12), (1, 12), (2, 12), (2, 12), (2, 12)]  # warm-up, then 2 rounds
    peer = [r for r in report.rows if r["backend"] == "llama.cpp"]
    assert all(r["× llama.cpp"] == 1.0 and r["prefill s"] == 0.01 for r in peer)
    assert all(r["median step ms"] == pytest.approx(3.0) for r in peer)
    assert all(r["bp/s"] > 0 and r["seconds"] > 0 for r in report.rows)
    assert (
        report.notes[:2] == ["parity (stand-in)", "doc"] and "best of 2 alternating rounds" in report.notes[2]
    )
    assert lines[0] == "parity (stand-in)" and len(lines) == 1 + 2 * 2 * 3


# ------------------------------------------------------------------ with llama.cpp
def _llama_ready() -> str | None:
    ok, why = llamacpp.llama_cpp_available()
    if not ok:
        return why
    try:
        find_converter()
    except FileNotFoundError as exc:
        return str(exc)
    return None


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    reason = _llama_ready()
    if reason:
        pytest.skip(f"llama.cpp peer not available: {reason}")
    folder = build_carbon_folder(tmp_path_factory.mktemp("lcpp") / "model", bpe="qwen3", num_hidden_layers=2)
    return folder, convert_to_gguf(folder, outtype="f32")


@pytest.mark.slow
def test_llama_cpp_matches_hexamer(converted: tuple[Path, Path]) -> None:
    import torch

    from hexamer import Carbon
    from hexamer.bench.tokenizer import random_dna

    folder, gguf = converted
    carbon = Carbon.from_pretrained(folder, dtype=torch.float32)
    backend = LlamaCppBackend(folder, gguf_path=gguf)
    assert backend.available() == (True, "")
    assert backend.tokenize("<dna>CCCCCC</dna>") == [151669, 154402, 151670]
    assert backend.tokenize("<dna>acgtacNNNNNNAT") == carbon.tokenizer.encode("<dna>acgtacNNNNNNAT")
    prompts = [random_dna(120, seed=i) for i in range(3)]
    report = backend.check_parity(carbon, prompts, logit_prompts=2, greedy_tokens=8)
    assert report.ids_equal == 3 and report.positions == 42 and report.relative_diff < 2e-3
    assert report.greedy_match == 8
    assert report.top1_agreement_tie_aware() == 1.0  # any flip lies within the logit discrepancy
    assert any("whitespace" in d for d in report.documented)
    # a sequence's output depends on its seed only, not on the batch it ran in
    solo, timings = backend.generate(prompts, 20, batch=1, seed=3)
    together, t3 = backend.generate(prompts, 20, batch=3, seed=3)
    assert solo == together and all(len(s) == 20 and set(s) <= set("ACGT") for s in solo)
    assert len(timings.step_s) == 3 * 3 and len(t3.step_s) == 3 and t3.new_tokens == 4
    with pytest.raises(ValueError, match="whole 6-mers"):
        backend.generate(["ACGTA"], 6)
    backend.close()


@pytest.mark.slow
def test_run_llamacpp_bench_quick(converted: tuple[Path, Path]) -> None:
    folder, _ = converted
    lines: list[str] = []
    report = llamacpp.run_llamacpp_bench(
        quick=True,
        folder=folder,
        batch_sizes=(1, 2),
        hexamer_modes=("token", "bp"),
        threads=1,
        log=lines.append,
    )
    assert [(r["backend"], r["batch"]) for r in report.rows] == [
        (b, n) for n in (1, 2) for b in ("hexamer token level", "hexamer bp level", "llama.cpp")
    ]
    assert all(r["bp/s"] > 0 and r["median step ms"] > 0 and r["prefill s"] > 0 for r in report.rows)
    assert all(r["× llama.cpp"] == 1.0 for r in report.rows if r["backend"] == "llama.cpp")
    with pytest.raises(ValueError, match="hexamer_modes"):
        llamacpp.run_llamacpp_bench(quick=True, folder=folder, hexamer_modes=("fast",))
    assert any(line.startswith("parity (f32)") for line in lines)
    assert "| backend | batch |" in report.to_markdown()


@pytest.mark.slow
def test_llama_cpp_quantizes_the_converted_folder_to_q8_0(
    converted: tuple[Path, Path], tmp_path: Path
) -> None:
    """llama.cpp's own quantizer makes the Q8_0 file, which llama.cpp loads as Q8_0 and runs."""
    import ctypes

    import llama_cpp

    folder, f32 = converted
    q8 = quantize_gguf(f32, tmp_path / "model.q8_0.gguf", "q8_0", n_threads=1)
    assert q8.stat().st_size < 0.4 * f32.stat().st_size  # ~1.06 bytes per weight against 4
    model = llama_cpp.Llama(str(q8), n_ctx=64, verbose=False)
    try:
        buffer = ctypes.create_string_buffer(256)
        n = llama_cpp.llama_model_desc(model.model, buffer, len(buffer))
        desc = buffer.raw[:n].decode()
    finally:
        model.close()
    assert "Q8_0" in desc, desc
    backend = LlamaCppBackend(folder, gguf_path=q8, n_threads=1)
    texts, timings = backend.generate(["ACGTAC" * 4], 12, batch=1, seed=0)
    assert len(texts[0]) == 12 and set(texts[0]) <= set("ACGT") and timings.step_s
    backend.close()


def test_convert_entry_refuses_a_fifo_tokenizer_config_not_reads_it(
    tiny_folder: Path, tmp_path: Path
) -> None:
    """The converter's tokenizer redirect reads ``tokenizer_config.json`` with the model-folder
    checks, so a FIFO there fails the conversion by name instead of hanging it."""
    import shutil
    import subprocess

    folder = tmp_path / "model"
    shutil.copytree(tiny_folder, folder)
    (folder / "tokenizer_config.json").unlink()
    os.mkfifo(folder / "tokenizer_config.json")
    converter = _fake_tree(tmp_path / "llama.cpp") / "convert_hf_to_gguf.py"
    converter.write_text(
        "import sys\nfrom transformers import AutoTokenizer\nAutoTokenizer.from_pretrained(sys.argv[1])\n"
    )
    proc = subprocess.run(
        converter_command(folder, tmp_path / "out.gguf", "f32", converter),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode != 0 and "tokenizer_config.json is not a regular file" in proc.stderr


@pytest.mark.slow
def test_llama_cpp_scores_bases_like_hexamer_and_its_q8_0_row_is_scored(
    converted: tuple[Path, Path], tmp_path: Path
) -> None:
    """llama.cpp's per-base log-likelihoods (its logits, hexamer's FNS scoring) equal
    ``Carbon.score(level="bp")`` on the f32 GGUF of the same weights, and its Q8_0 file gets a
    scored row in the fidelity report, close to float32."""
    import torch

    from hexamer import Carbon
    from hexamer.bench.llamacpp.scoring import llama_cpp_per_base
    from hexamer.bench.quant import llama_cpp_scorer, load_variants, run_quant_fidelity
    from hexamer.bench.tokenizer import random_dna

    folder, f32 = converted
    carbon = Carbon.from_pretrained(folder, dtype=torch.float32)
    seqs = [random_dna(60, seed=1), random_dna(47, seed=2) + "NNNNNN" + "ACG"]
    backend = LlamaCppBackend(folder, gguf_path=f32, n_threads=1)
    theirs = llama_cpp_per_base(backend, seqs)
    backend.close()
    for ours, other in zip(carbon.score(seqs, level="bp"), theirs, strict=True):
        assert other.shape == ours.per_base.shape
        np.testing.assert_array_equal(np.isnan(other), np.isnan(ours.per_base))  # <oov> bases unscored
        np.testing.assert_allclose(other, ours.per_base, atol=2e-3, equal_nan=True)
    q8 = quantize_gguf(f32, tmp_path / "model.q8_0.gguf", "q8_0", n_threads=1)
    peer, skipped = llama_cpp_scorer(q8, folder)
    assert peer is not None and skipped is None
    carbons = load_variants(folder, ("float32",), 2, lambda _: None)
    report = run_quant_fidelity(
        carbons, model_name="tiny", n_variants=4, n_windows=2, window_bp=48, peer=peer
    )
    row = report.rows[-1]
    assert row["variant"] == "llama.cpp Q8_0" and row["status"] == "ok"
    assert 0 < row["|Δ log P| max"] < 0.5 and row["n_bases"] == 4 * 48 + 4 * 48


def test_gguf_of_a_folder_inside_the_package_goes_to_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hexamer.demo import demo_model_path

    monkeypatch.setenv("HEXAMER_CACHE", str(tmp_path))
    path = default_gguf_path(demo_model_path(), "q8_0")
    assert tmp_path / "gguf" in path.parents and path.name == "demo-model.q8_0.gguf"


@pytest.mark.slow
def test_demo_model_converts_with_its_small_qwen2_vocabulary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The converter's pre-tokenizer hash only knows full vocabularies; the demo model's 400-token
    BPE has Qwen2's pre-tokenizer, read from its tokenizer.json, and llama.cpp tokenizes its DNA."""
    reason = _llama_ready()
    if reason:
        pytest.skip(f"llama.cpp peer not available: {reason}")
    from hexamer.demo import demo_model_path
    from hexamer.tokenizer import CarbonTokenizer

    folder = demo_model_path()
    gguf = convert_to_gguf(folder, tmp_path / "demo.f32.gguf", outtype="f32")
    backend = LlamaCppBackend(folder, gguf_path=gguf, n_threads=1)
    text = "<dna>ACGTACGGTTAC"
    assert backend.tokenize(text) == CarbonTokenizer.from_pretrained(folder).encode(text)
    backend.close()
