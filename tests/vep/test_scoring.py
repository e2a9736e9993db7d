"""score_variants: every record accounted for, statuses, and engine == naive recipe."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hexamer import Carbon
from hexamer.synthetic.vcf import write_random_vcf
from hexamer.vep import ContigRenameWarning, Reference, read_vcf, score_variants
from hexamer.vep import runner as runner_mod
from hexamer.vep import settings as settings_mod
from hexamer.vep.recipes import (
    NextBaseContext,
    alt_window,
    context_anchor,
    context_start,
    naive_window_score,
    reverse_complement,
    variant_windows,
    window_bounds,
    window_centre,
)

from .conftest import EDGE_VCF, FASTA, MALFORMED_VCF, SLICE_VCF

TOL = 1e-4


def _rows(carbon: Carbon, vcf: Path, **kw: object) -> list[dict]:
    return list(score_variants(carbon, vcf, FASTA, on_note=lambda _: None, **kw))  # type: ignore[arg-type]


def _input_keys(vcf: Path) -> list[tuple[int, int]]:
    return [v.key for rec in read_vcf(vcf) for v in rec.variants()]


@pytest.mark.parametrize("recipe", ["window", "next_base"])
@pytest.mark.parametrize("vcf", [EDGE_VCF, MALFORMED_VCF, SLICE_VCF], ids=lambda p: p.stem)
def test_every_input_record_and_alt_gets_one_row_in_order(carbon: Carbon, recipe: str, vcf: Path) -> None:
    rows = _rows(carbon, vcf, recipe=recipe, window=600, context=600, context_grid=600)
    assert [(r["record"], r["alt_index"]) for r in rows] == _input_keys(vcf)
    assert {r["record"] for r in rows} == set(range(len(list(read_vcf(vcf)))))
    for r in rows:
        assert r["status"] in ("ok", "skipped", "ref_mismatch", "failed")
        assert (r["score"] is not None) == (r["status"] == "ok")
        assert (r["reason"] is None) == (r["status"] == "ok")
        assert r["recipe"] == recipe


def _by_id(rows: list[dict]) -> dict[str, dict]:
    return {f"{r['id']}/{r['alt_index']}": r for r in rows}


def test_edge_case_statuses(carbon: Carbon) -> None:
    window = _by_id(_rows(carbon, EDGE_VCF, recipe="window", window=600))
    expected = {
        "multi_snv/0": "ok",
        "multi_snv/2": "ok",
        "same_site/0": "ok",
        "mnv/0": "ok",
        "deletion/0": "ok",
        "insertion/0": "ok",
        "complex/0": "ok",
        "sv_del/0": "skipped",
        "star/0": "ok",
        "star/1": "skipped",
        "breakend/0": "skipped",
        "ref_mismatch/0": "ref_mismatch",
        "no_alt/0": "skipped",
        "lower_case/0": "ok",
        "chr_prefix/0": "ok",
        "unknown_contig/0": "skipped",
        "in_gap/0": "skipped",
        "after_gap/0": "ok",
        "contig_start/0": "skipped",
        "contig_end/0": "ok",
        "del_past_end/0": "ref_mismatch",
    }
    assert {k: window[k]["status"] for k in expected} == expected
    assert "does not match the FASTA (C)" in window["ref_mismatch/0"]["reason"]
    assert "runs past the end" in window["del_past_end/0"]["reason"]
    assert "chrUn_gl000220" in window["unknown_contig/0"]["reason"]
    # the same ALT at the same site, from two records, is one window: identical scores
    assert window["same_site/0"]["score"] == window["multi_snv/0"]["score"]
    nb = _by_id(_rows(carbon, EDGE_VCF, recipe="next_base", context=600, context_grid=600))
    for key in ("mnv/0", "deletion/0", "insertion/0", "complex/0"):
        assert nb[key]["status"] == "skipped" and "SNVs only" in nb[key]["reason"]
    assert nb["multi_snv/1"]["status"] == "ok" and nb["contig_end/0"]["status"] == "ok"


def test_contig_rename_is_announced_once(carbon: Carbon) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        list(score_variants(carbon, EDGE_VCF, FASTA, recipe="next_base", context=600, context_grid=600))
    notes = [str(w.message) for w in caught if issubclass(w.category, ContigRenameWarning)]
    assert notes == ["VCF contig 'chr20' is not in the FASTA; using its contig '20'"]
    assert {w.filename for w in caught if issubclass(w.category, ContigRenameWarning)} == {__file__}


def _compare(a: list[dict], b: list[dict]) -> float:
    assert [(r["record"], r["alt_index"], r["status"]) for r in a] == [
        (r["record"], r["alt_index"], r["status"]) for r in b
    ]
    diffs = [abs(x["score"] - y["score"]) for x, y in zip(a, b, strict=True) if x["status"] == "ok"]
    assert diffs
    return max(diffs)


@pytest.mark.parametrize(
    ("vcf", "window"), [(EDGE_VCF, 1200), (SLICE_VCF, 5000)], ids=["edge-1200", "slice-5000"]
)
def test_window_engine_equals_naive_recipe(carbon: Carbon, vcf: Path, window: int) -> None:
    fast = _rows(carbon, vcf, recipe="window", window=window, batch_size=4)
    naive = _rows(carbon, vcf, recipe="window", window=window, naive=True)
    assert _compare(fast, naive) < TOL
    # indels too: the insertion/deletion rows are scored and match
    kinds = {r["kind"] for r in fast if r["status"] == "ok"}
    assert {"SNV", "insertion"} <= kinds


def test_window_rc_average(carbon: Carbon) -> None:
    fast = _rows(carbon, SLICE_VCF, recipe="window", window=900, rc_average=True)
    naive = _rows(carbon, SLICE_VCF, recipe="window", window=900, rc_average=True, naive=True)
    assert _compare(fast, naive) < TOL
    forward = _rows(carbon, SLICE_VCF, recipe="window", window=900)
    # rc averaging = mean of the forward delta and the delta of the reverse-complemented windows
    with Reference(FASTA) as ref:
        for row, fwd in zip(fast, forward, strict=True):
            if row["status"] != "ok":
                continue
            pair = variant_windows(
                lambda a, b: ref.fetch("20", a, b), row["pos"] - 1, row["ref"], row["alt"], 440_000, 900
            )
            assert pair is not None
            rc = naive_window_score(carbon, reverse_complement(pair.ref), reverse_complement(pair.alt))
            assert row["score"] == pytest.approx((fwd["score"] + rc) / 2, abs=TOL)
            assert row["score"] != pytest.approx(fwd["score"], abs=1e-9)


def test_window_is_centred_and_clipped() -> None:
    assert window_bounds(10_000, 1, 440_000, 8192) == (10_000 - 4096, 10_000 + 4096)
    assert window_bounds(100, 1, 440_000, 8192) == (0, 4196)  # clipped at the contig start
    assert window_bounds(439_999, 1, 440_000, 8192) == (439_999 - 4096, 440_000)  # and at the end
    assert window_bounds(1000, 50, 440_000, 60) == (970, 1050)  # a long REF always fits
    assert alt_window("AAACCCGGG", 3, "CCC", "T") == "AAATGGG"
    assert reverse_complement("ACGTN") == "NACGT"


def test_next_base_shared_prefix_equals_naive_per_variant(carbon: Carbon, tmp_path: Path) -> None:
    # 30 SNV sites in 3 kb (1-3 ALTs each): with a 1,200 bp grid they share few prefills
    vcf = tmp_path / "cluster.vcf"
    write_random_vcf(FASTA, vcf, n_sites=30, alts_per_site=2, region=("20", 100_000, 103_000), seed=3)
    calls: list[int] = []
    original = runner_mod.Runner.next_base_logprobs

    def counting(self: object, groups: list) -> list:
        calls.extend(len(g.sites) for g in groups)
        return original(self, groups)  # type: ignore[arg-type]

    runner_mod.Runner.next_base_logprobs = counting  # type: ignore[method-assign]
    try:
        fast = _rows(carbon, vcf, recipe="next_base", context=3000, context_grid=1200)
    finally:
        runner_mod.Runner.next_base_logprobs = original  # type: ignore[method-assign]
    naive = _rows(carbon, vcf, recipe="next_base", context=3000, context_grid=1200, naive=True)
    assert _compare(fast, naive) < TOL
    assert sum(calls) == 30 and len(calls) < 20  # 30 sites, far fewer forwards
    # real GoNL SNVs too, and the edge cases (contig end, after the N gap, multi-allelic)
    for path in (SLICE_VCF, EDGE_VCF):
        a = _rows(carbon, path, recipe="next_base", context=1800, context_grid=600)
        b = _rows(carbon, path, recipe="next_base", context=1800, context_grid=600, naive=True)
        assert _compare(a, b) < TOL


@given(
    p0=st.integers(0, 10**7),
    context=st.integers(0, 5000).map(lambda x: x - x % 6),
    grid=st.integers(1, 3000).map(lambda x: 6 * x),
)
def test_context_anchor_properties(p0: int, context: int, grid: int) -> None:
    a = context_anchor(p0, context, grid)
    assert (p0 - a) % 6 == 0 and a >= 0
    if p0 - context >= 6:
        assert context <= p0 - a < context + grid
    exact = context_anchor(p0, context, 6)
    assert exact == max(p0 - context, p0 % 6) or p0 - context < 0


def test_context_start_drops_leading_n_and_keeps_phase() -> None:
    assert context_start(100, 160, 0) == 100
    assert context_start(100, 160, 7) == 112
    assert context_start(100, 160, 500) == 160  # all N: empty context
    with Reference(FASTA) as ref:
        # 20:60004 (after the 60 kb N gap): the context starts at the first 6-mer boundary past the gap
        p0 = 60_003
        anchor = context_anchor(p0, 1800, 600)
        seq = ref.fetch("20", anchor, p0)
        start = context_start(anchor, p0, len(seq) - len(seq.lstrip("N")))
        assert (p0 - start) % 6 == 0 and start >= 60_000 and start < 60_006


def test_next_base_context_is_clipped_to_the_model(carbon: Carbon) -> None:
    limit = 6 * (carbon.context_length - 1)
    ctx = NextBaseContext.for_model(24576, 6144, carbon.context_length)
    assert ctx.context == limit and ctx.grid == 6
    ctx = NextBaseContext.for_model(3001, 1000, carbon.context_length)
    assert ctx.context == 3000 and ctx.grid == 996
    rows = _rows(carbon, SLICE_VCF, recipe="next_base")  # defaults are longer than the tiny model
    assert sum(r["status"] == "ok" for r in rows) == 7


def test_bad_settings_raise(carbon: Carbon) -> None:
    with pytest.raises(ValueError, match="recipe must be one of"):
        score_variants(carbon, SLICE_VCF, FASTA, recipe="exact")
    with pytest.raises(ValueError, match="rc_average applies to the window recipe"):
        score_variants(carbon, SLICE_VCF, FASTA, recipe="next_base", rc_average=True)
    with pytest.raises(ValueError, match="no such file"):
        score_variants(carbon, SLICE_VCF.with_name("missing.vcf"), FASTA)


def test_a_failing_unit_marks_its_rows_failed_and_the_job_goes_on(
    carbon: Carbon, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(self: object, groups: list) -> list:
        raise RuntimeError("out of memory (simulated)")

    monkeypatch.setattr(runner_mod.Runner, "window_scores", boom)
    rows = _rows(carbon, EDGE_VCF, recipe="window", window=600)
    assert [(r["record"], r["alt_index"]) for r in rows] == _input_keys(EDGE_VCF)
    failed = [r for r in rows if r["status"] == "failed"]
    assert failed and all("out of memory (simulated)" in r["reason"] for r in failed)
    assert all(r["id"] for r in failed)  # full rows, not bare keys
    assert {r["status"] for r in rows} == {"failed", "skipped", "ref_mismatch"}


# --------------------------------------------------------------------------- window grid


@given(
    p0=st.integers(0, 50_000),
    grid=st.sampled_from([1, 6, 100, 256, 600]),
    window=st.sampled_from([1200, 1201, 8192]),
)
def test_window_grid_shares_windows_within_a_tile(p0: int, grid: int, window: int) -> None:
    start, end = window_bounds(p0, 1, 10**6, window, grid)
    assert start <= p0 < end
    assert end - start == window or start == 0
    centre = window_centre(p0, grid)
    assert abs(centre - p0) <= grid // 2
    assert start == max(0, centre - window // 2)
    # every variant of the tile gets the same window; grid 1 is the centred recipe
    tile = grid * (p0 // grid)
    assert window_bounds(tile, 1, 10**6, window, grid) == (start, end)
    assert window_bounds(tile + grid - 1, 1, 10**6, window, grid) == (start, end)
    if grid == 1:
        assert (start, end) == window_bounds(p0, 1, 10**6, window)


def _dense_vcf(tmp_path: Path, n_sites: int = 14, alts: int = 1, seed: int = 3) -> Path:
    vcf = tmp_path / f"dense-{n_sites}-{alts}.vcf"
    write_random_vcf(
        FASTA, vcf, n_sites=n_sites, alts_per_site=alts, region=("20", 300_000, 301_200), seed=seed
    )
    return vcf


def _count_tokens(monkeypatch: pytest.MonkeyPatch, carbon: Carbon) -> list[int]:
    seen: list[int] = []
    model = carbon.model
    forward = type(model).forward

    def counting(self: object, input_ids, *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        seen.append(int(input_ids.numel()))
        return forward(self, input_ids, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(type(model), "forward", counting)
    return seen


@pytest.mark.parametrize("batch_size", [2, 8])
def test_window_grid_scores_equal_the_gridded_recipe_by_the_book(
    carbon: Carbon, tmp_path: Path, batch_size: int
) -> None:
    vcf = _dense_vcf(tmp_path, alts=2)
    fast = _rows(carbon, vcf, recipe="window", window=1200, window_grid=300, batch_size=batch_size)
    assert [(r["record"], r["alt_index"]) for r in fast] == _input_keys(vcf)
    assert all(r["status"] == "ok" for r in fast)
    with Reference(FASTA) as ref:
        for row in fast:  # an independent computation: one full forward per window
            p0 = row["pos"] - 1
            start, end = window_bounds(p0, 1, ref.lengths["20"], 1200, 300)
            ref_win = ref.fetch("20", start, end)
            expected = naive_window_score(
                carbon, ref_win, alt_window(ref_win, p0 - start, row["ref"], row["alt"])
            )
            assert row["score"] == pytest.approx(expected, abs=TOL)
    naive = _rows(carbon, vcf, recipe="window", window=1200, window_grid=300, naive=True)
    assert _compare(fast, naive) < TOL
    centred = _rows(carbon, vcf, recipe="window", window=1200)
    assert max(abs(a["score"] - b["score"]) for a, b in zip(fast, centred, strict=True)) > 1e-6


def test_window_grid_runs_fewer_tokens(
    carbon: Carbon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    vcf = _dense_vcf(tmp_path)
    seen = _count_tokens(monkeypatch, carbon)
    _rows(carbon, vcf, recipe="window", window=1200)
    centred = sum(seen)
    seen.clear()
    _rows(carbon, vcf, recipe="window", window=1200, window_grid=600)
    gridded = sum(seen)
    # 14 SNVs in 1.2 kb fall in 2-3 tiles: one ref forward per tile instead of one per variant
    assert gridded < 0.75 * centred


def test_window_grid_settings_are_checked(carbon: Carbon) -> None:
    with pytest.raises(ValueError, match="window_grid must be between 1"):
        score_variants(carbon, SLICE_VCF, FASTA, window=1200, window_grid=601)
    with pytest.raises(ValueError, match="window_grid must be between 1"):
        score_variants(carbon, SLICE_VCF, FASTA, window=1200, window_grid=0)
    with pytest.raises(ValueError, match="window_grid applies to the window recipe only"):
        score_variants(carbon, SLICE_VCF, FASTA, recipe="next_base", window_grid=100)


def test_a_window_larger_than_the_model_is_fitted_with_a_note(carbon: Carbon) -> None:
    """Like ``hexamer eval``: a window the model cannot take is cut to fit, and said so."""
    notes: list[str] = []
    rows = list(score_variants(carbon, EDGE_VCF, FASTA, window=20_000, on_note=notes.append))
    limit = 6 * (carbon.context_length - 1)
    assert f"window 20000 bp -> {limit} bp" in " ".join(notes)
    by_id = {r["id"]: r for r in rows}
    # the windows of an insertion hold the same number of bases, within the model's context
    for ident in ("insertion", "deletion", "complex", "multi_snv"):
        row = by_id[ident]
        assert row["status"] == "ok", row
        assert row["n_scored_bp"] + row["n_oov_bp"] == limit
    with pytest.warns(settings_mod.SettingsFittedWarning, match="window 20000 bp") as caught:
        score_variants(carbon, EDGE_VCF, FASTA, window=20_000)
    assert caught[0].filename == __file__  # the user's call, not a line inside hexamer


@pytest.mark.filterwarnings("ignore::hexamer.vep.ContigRenameWarning")
def test_settings_fitted_warning_points_at_the_users_call(carbon: Carbon, tmp_path: Path) -> None:
    from hexamer.vep.job import run_vep

    with pytest.warns(settings_mod.SettingsFittedWarning) as caught:
        run_vep(carbon, EDGE_VCF, FASTA, tmp_path / "out.tsv", window=20_000)
    assert {w.filename for w in caught} == {__file__}
    with pytest.warns(settings_mod.SettingsFittedWarning) as caught:
        settings_mod.VepSettings(recipe="next_base").checked(carbon)
    assert {w.filename for w in caught} == {__file__}


def test_next_base_context_larger_than_the_model_is_fitted_with_a_note(carbon: Carbon) -> None:
    notes: list[str] = []
    list(score_variants(carbon, SLICE_VCF, FASTA, recipe="next_base", on_note=notes.append))
    assert any(n.startswith("context 24576 bp -> ") for n in notes)
    notes.clear()
    list(score_variants(carbon, SLICE_VCF, FASTA, recipe="next_base", context=600, on_note=notes.append))
    assert not any(n.startswith("context") for n in notes)  # fits: nothing to say


@pytest.mark.parametrize("recipe", ["window", "next_base"])
@pytest.mark.parametrize("naive", [False, True])
def test_non_finite_model_output_gives_failed_rows(
    carbon: Carbon, overflow_folder: Path, recipe: str, naive: bool
) -> None:
    """A model whose output is NaN: every row a healthy model scores is failed with the reason."""
    from hexamer.model.finite import non_finite_output

    settings = {"recipe": recipe, "window": 600, "context": 600, "context_grid": 600, "naive": naive}
    good = _rows(carbon, SLICE_VCF, **settings)
    rows = _rows(Carbon.from_pretrained(overflow_folder), SLICE_VCF, **settings)
    assert [(r["record"], r["alt_index"]) for r in rows] == _input_keys(SLICE_VCF)
    assert sum(r["status"] == "ok" for r in good) >= 5
    for g, r in zip(good, rows, strict=True):
        if g["status"] == "ok":
            assert (
                r["status"] == "failed" and r["score"] is None and r["reason"] == non_finite_output("score")
            )
        else:
            assert (r["status"], r["reason"]) == (g["status"], g["reason"])


def test_result_row_refuses_an_ok_score_that_is_not_a_number() -> None:
    from hexamer.io.vcf.records import Variant
    from hexamer.vep.rows import result_row

    v = next(rec for rec in read_vcf(SLICE_VCF)).variants()[0]
    assert isinstance(v, Variant)
    assert result_row(v, "window", "ok", -0.5)["status"] == "ok"
    for score in (float("nan"), float("inf"), float("-inf"), None):
        row = result_row(v, "window", "ok", score)
        assert row["status"] == "failed" and row["score"] is None and "non-finite score" in row["reason"]
