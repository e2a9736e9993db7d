"""DNA endpoints and embeddings equal the library's answers for the same inputs and seeds."""

from __future__ import annotations

import base64
import json

import httpx
import numpy as np
import pytest

from hexamer import Carbon
from hexamer.embed import embed_sequences
from hexamer.vep.recipes import naive_window_score, window_bounds


def _post(url: str, path: str, **body: object) -> dict:
    r = httpx.post(f"{url}{path}", json=body, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize("mode", ["bp", "token"])
def test_generate_equals_carbon(url: str, ref: Carbon, mode: str) -> None:
    prompts = ["ACGTACGGTAC", "<mammalian_species><dna>TTGACA"]
    out = _post(
        url, "/v1/dna/generate", prompt=prompts, max_bp=23, mode=mode, seed=4, n=2, top_p=0.9, temperature=0.8
    )
    want = ref.generate(
        [p for p in prompts for _ in range(2)], max_bp=23, mode=mode, seed=4, top_p=0.9, temperature=0.8
    )
    assert [c["sequence"] for c in out["choices"]] == [g.sequence for g in want]
    assert [c["prompt_index"] for c in out["choices"]] == [0, 0, 1, 1]
    assert all(c["n_bp"] == 23 for c in out["choices"])
    assert out["usage"]["generated_bp"] == 4 * 23


def test_generate_mask_tags_and_stream(url: str, ref: Carbon) -> None:
    body = {
        "prompt": "ACGTAC",
        "max_bp": 14,
        "mask": "NNNATGNNNRY",
        "temperature": 0,
        "tags": ["mammalian_species"],
    }
    out = _post(url, "/v1/dna/generate", **body)
    want = ref.generate("ACGTAC", max_bp=14, mask="NNNATGNNNRY", temperature=0, prefix="<mammalian_species>")
    assert out["choices"][0]["sequence"] == want.sequence and want.sequence[3:6] == "ATG"
    text = ""
    with httpx.stream("POST", f"{url}/v1/dna/generate", json={**body, "stream": True}, timeout=60) as r:
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                text += json.loads(line[6:])["choices"][0]["delta"]
    assert text == want.sequence


@pytest.mark.parametrize(("level", "method"), [("bp", "fns"), ("bp", "exact"), ("token", "fns")])
def test_score_equals_carbon(url: str, ref: Carbon, level: str, method: str) -> None:
    seqs = ["ACGTACGGTACCATNNACGT", "TTGACA"]
    out = _post(url, "/v1/dna/score", sequences=seqs, level=level, method=method, per_position=True)
    want = ref.score(seqs, level=level, method=method)
    for got, w in zip(out["data"], want, strict=True):
        assert got["mean"] == pytest.approx(w.mean, abs=1e-6)
        assert got["n_scored"] == w.n_scored and got["n_oov_bases"] == w.n_oov_bases
        arr = w.per_base if level == "bp" else w.per_token
        key = "per_base" if level == "bp" else "per_token"
        assert np.allclose(np.array(got[key], dtype=float), arr, equal_nan=True, atol=1e-6)


def test_vep_equals_window_recipe(url: str, ref: Carbon) -> None:
    rng = np.random.default_rng(0)
    seq = "".join(rng.choice(list("ACGT"), 300))
    p0 = 150
    alt = "A" if seq[p0] != "A" else "C"
    variants = [
        {"sequence": seq, "pos": p0 + 1, "ref": seq[p0], "alt": alt, "id": "snv"},
        {"sequence": seq, "pos": p0 + 1, "ref": seq[p0 : p0 + 3], "alt": seq[p0], "id": "del"},
        {"sequence": seq, "pos": 10, "ref": "N", "alt": "A", "id": "bad"},
    ]
    out = _post(url, "/v1/dna/vep", variants=variants, window=120, rc_average=True, position_base=1)
    rows = out["data"]
    for v, row in zip(variants[:2], rows[:2], strict=True):
        q0 = int(v["pos"]) - 1
        start, end = window_bounds(q0, len(v["ref"]), len(seq), 120)
        ref_win = seq[start:end]
        # the deletion's alt window takes its 2 missing bases on the right (equal lengths)
        alt_win = seq[start:q0] + v["alt"] + seq[q0 + len(v["ref"]) : end + len(v["ref"]) - len(v["alt"])]
        assert len(alt_win) == len(ref_win)
        want = naive_window_score(ref, ref_win, alt_win, rc_average=True)
        assert row["status"] == "ok" and row["score"] == pytest.approx(want, abs=1e-6)
    assert rows[2]["status"] == "ref_mismatch" and rows[2]["score"] is None


def test_vep_n_next_to_a_variant_is_skipped_not_scored(url: str, ref: Carbon) -> None:
    """An N allele, or an N sharing the variant's 6-mer, used to give an `ok` row (ALT N scored,
    REF N 0.0): the variant's bases were inside an <oov> 6-mer."""
    rng = np.random.default_rng(1)
    seq = list("".join(rng.choice(list("ACGT"), 300)))
    seq[152] = "N"
    seq = "".join(seq)
    p0 = 150  # window 120: the variant starts its 6-mer [150, 156), which holds the N at 152
    alt = "A" if seq[p0] != "A" else "C"
    far = 100  # window [40, 160): its 6-mer is clean, the N is in the window
    variants = [
        {"sequence": seq, "pos": p0 + 1, "ref": seq[p0], "alt": alt},
        {"sequence": seq, "pos": p0 + 1, "ref": seq[p0], "alt": "N"},
        {"sequence": seq, "pos": 153, "ref": "N", "alt": "A"},
        {"sequence": seq, "pos": far + 1, "ref": seq[far], "alt": "A" if seq[far] != "A" else "C"},
    ]
    rows = _post(url, "/v1/dna/vep", variants=variants, window=120, position_base=1)["data"]
    for row in rows[:3]:
        assert row["status"] == "skipped" and row["score"] is None and row["reason"]
    assert "<oov>" in rows[0]["reason"]
    assert rows[3]["status"] == "ok" and rows[3]["n_oov_bp"] == 6 and rows[3]["n_scored_bp"] == 114


def test_embeddings_equal_hexamer_embed(url: str, ref: Carbon) -> None:
    seqs = ["ACGTACGGTACCAT", "TTGACATTGACA"]
    want = [v for _, v in embed_sequences(ref, seqs, pool="mean")]
    out = _post(url, "/v1/embeddings", input=seqs, model=None)
    for got, w in zip(out["data"], want, strict=True):
        assert np.allclose(got["embedding"], w, atol=1e-5)
    b64 = _post(url, "/v1/embeddings", input=seqs[0], encoding_format="base64", pool="last")
    vec = np.frombuffer(base64.b64decode(b64["data"][0]["embedding"]), dtype="<f4")
    last = next(iter(embed_sequences(ref, [seqs[0]], pool="last")))[1]
    assert np.allclose(vec, last, atol=1e-5)


@pytest.mark.parametrize(
    "options",
    [
        {"max_bp": 50, "mode": "bp"},  # 2 forced bases + 50 new: a partial first and last 6-mer
        {"max_tokens": 9, "mode": "token"},
        {"max_bp": 1, "mode": "bp"},
    ],
)
def test_stream_deltas_add_up_incrementally(url: str, ref: Carbon, options: dict) -> None:
    body = {"prompt": "ACGTACGT", "temperature": 0, **options}
    want = ref.generate(
        "ACGTACGT",
        max_bp=options.get("max_bp"),
        max_new_tokens=options.get("max_tokens"),
        mode=options["mode"],
        temperature=0,
    )
    deltas = []
    with httpx.stream("POST", f"{url}/v1/dna/generate", json={**body, "stream": True}, timeout=60) as r:
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                deltas.append(json.loads(line[6:])["choices"][0]["delta"])
    assert "".join(deltas) == want.sequence
    if len(want.sequence) > 12:
        assert len([d for d in deltas if d]) > 2  # streamed as it was made, not at the end


def test_vep_equals_score_variants_on_the_chr20_slice(url: str, ref: Carbon) -> None:
    """/v1/dna/vep runs the shared-prefix scorer of ``hexamer vep``: the same numbers as
    :func:`hexamer.vep.score_variants` on the committed GoNL/1000 Genomes records."""
    from hexamer.vep import Reference, score_variants
    from tests.vep.conftest import FASTA, SLICE_VCF

    want = [r for r in score_variants(ref, SLICE_VCF, FASTA, window=600) if r["status"] == "ok"]
    assert len(want) >= 8 and {r["kind"] for r in want} >= {"SNV", "insertion"}
    variants = []
    with Reference(FASTA) as fasta:
        for r in want:
            p0 = int(r["pos"]) - 1
            lo, hi = p0 - 1000, min(fasta.lengths["20"], p0 + 1000)
            seq = fasta.fetch("20", lo, hi)
            variants.append(
                {"sequence": seq, "pos": p0 - lo, "ref": r["ref"], "alt": r["alt"], "id": r["id"]}
            )
    rows = _post(url, "/v1/dna/vep", variants=variants, window=600, position_base=0)["data"]
    assert [row["status"] for row in rows] == ["ok"] * len(want)
    for row, w in zip(rows, want, strict=True):
        assert row["score"] == pytest.approx(w["score"], abs=1e-9)
        assert (row["n_scored_bp"], row["n_oov_bp"]) == (w["n_scored_bp"], w["n_oov_bp"])


def test_vep_alt_equal_to_ref_is_skipped(url: str) -> None:
    """REF = ALT used to be an `ok` 0.0: its two windows are the same window."""
    rng = np.random.default_rng(2)
    seq = "".join(rng.choice(list("ACGT"), 200))
    variants = [
        {"sequence": seq, "pos": 101, "ref": seq[100], "alt": seq[100].lower()},
        {"sequence": seq, "pos": 101, "ref": seq[100], "alt": "A" if seq[100] != "A" else "C"},
    ]
    rows = _post(url, "/v1/dna/vep", variants=variants, window=120)["data"]
    assert rows[0]["status"] == "skipped" and rows[0]["score"] is None
    assert rows[0]["reason"].startswith("ALT equals REF")
    assert rows[1]["status"] == "ok"


@pytest.mark.parametrize("window", [1, 6, 29])
def test_vep_window_shorter_than_the_cli_minimum_is_refused(url: str, window: int) -> None:
    body = {"variants": [{"sequence": "ACGT" * 20, "pos": 40, "ref": "T", "alt": "A"}], "window": window}
    r = httpx.post(f"{url}/v1/dna/vep", json=body, timeout=60)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert "window must be at least 30 bp" in error["message"] and error["param"] == "window"


@pytest.fixture(scope="module")
def short_model(tmp_path_factory: pytest.TempPathFactory) -> Carbon:
    """A model whose context (256 tokens: 1,530 bp) is shorter than the default 8,192 bp window."""
    from hexamer.synthetic import build_carbon_folder

    return Carbon.from_pretrained(
        build_carbon_folder(tmp_path_factory.mktemp("short") / "model", max_position_embeddings=256)
    )


def test_vep_default_window_is_fitted_to_a_short_model_as_the_cli_fits_it(short_model: Carbon) -> None:
    """/v1/dna/vep once failed every variant of an 800 bp sequence on such a model ("a 8192 bp
    window does not fit"), where hexamer vep fitted the window with a note."""
    from hexamer.server.testing import serve_in_thread
    from hexamer.vep import VepSettings

    rng = np.random.default_rng(3)
    seq = "".join(rng.choice(list("ACGT"), 800))
    alt = "A" if seq[400] != "A" else "C"
    cli_notes: list[str] = []
    fitted = VepSettings().checked(short_model, on_note=cli_notes.append)
    assert fitted.window == 6 * 255 and cli_notes
    with serve_in_thread(short_model, max_num_seqs=2, request_timeout_s=60) as base:
        out = _post(
            base, "/v1/dna/vep", variants=[{"sequence": seq, "pos": 401, "ref": seq[400], "alt": alt}]
        )
    assert out["window"] == fitted.window and out["notes"] == cli_notes
    (row,) = out["data"]
    assert row["status"] == "ok" and (row["window_start"], row["window_end"]) == (0, 800)
    want = naive_window_score(short_model, seq, seq[:400] + alt + seq[401:])
    assert row["score"] == pytest.approx(want, abs=1e-6)


def test_embeddings_take_the_chunking_options(url: str, ref: Carbon) -> None:
    """``max_tokens`` and ``chunk_overlap`` reach :func:`embed_sequences` (what a client's
    ``Carbon.from_server(...).embed`` sends); a wrong one is a 400 naming it, before any work."""
    seq = "".join(np.random.default_rng(2).choice(list("ACGT"), 200))
    options = {"max_tokens": 12, "chunk_overlap": 18, "pool": "mean", "layer": 1}
    out = _post(url, "/v1/embeddings", input=seq, encoding_format="base64", **options)
    vec = np.frombuffer(base64.b64decode(out["data"][0]["embedding"]), dtype="<f4")
    ((_, want),) = embed_sequences(ref, [seq], **options)
    assert np.allclose(vec, want, atol=1e-5)
    for field, value in (("max_tokens", 10**6), ("chunk_overlap", -1), ("layer", 99)):
        r = httpx.post(f"{url}/v1/embeddings", json={"input": seq, field: value}, timeout=60)
        assert r.status_code == 400 and r.json()["error"]["param"] == field, r.text


def test_models_name_the_embedding_facts_and_limits(url: str, ref: Carbon) -> None:
    facts = httpx.get(f"{url}/v1/models", timeout=60).json()["data"][0]["hexamer"]
    backend = ref.backend
    assert facts["hidden_size"] == backend.hidden_size and facts["num_layers"] == backend.num_layers  # type: ignore[attr-defined]
    assert {"max_prompts", "max_bp", "max_body_bytes"} <= set(facts)
