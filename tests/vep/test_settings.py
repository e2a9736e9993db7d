"""VepSettings: built once, passed whole, checked once; the keyword path gives the same rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from hexamer import Carbon
from hexamer.vep import Reference, VepSettings, run_vep, score_variants
from hexamer.vep.recipes import min_context, min_window, naive_window_score, variant_windows
from hexamer.vep.settings import VepSettingsError
from tests.vep.conftest import EDGE_VCF, FASTA, REF_EQUALS_ALT_VCF


def test_settings_object_and_keywords_give_the_same_rows(carbon: Carbon) -> None:
    settings = VepSettings(recipe="next_base", context=120, context_grid=60)
    a = list(score_variants(carbon, EDGE_VCF, FASTA, settings=settings, on_note=lambda _: None))
    b = list(
        score_variants(
            carbon, EDGE_VCF, FASTA, recipe="next_base", context=120, context_grid=60, on_note=lambda _: None
        )
    )
    assert a == b and any(r["status"] == "ok" for r in a)


def test_settings_and_keywords_together_or_unknown_keywords_are_refused(carbon: Carbon) -> None:
    with pytest.raises(TypeError, match="not both"):
        score_variants(carbon, EDGE_VCF, FASTA, settings=VepSettings(), window=600)
    with pytest.raises(TypeError, match="unknown VEP setting"):
        score_variants(carbon, EDGE_VCF, FASTA, windw=600)


def test_checked_marks_a_copy_and_changes_no_field(carbon: Carbon) -> None:
    settings = VepSettings(window=600)
    checked = settings.checked(carbon)
    assert checked.is_checked and not settings.is_checked
    assert checked.as_dict() == {**settings.as_dict(), "token_budget": 4096}  # CPU default filled in
    assert checked.checked(carbon) == checked


@pytest.mark.parametrize("entry", ["run_vep", "score_variants"])
def test_settings_are_checked_once_per_run(
    carbon: Carbon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: str
) -> None:
    calls: list[VepSettings] = []
    original = VepSettings.checked

    def counting(self: VepSettings, *args: object, **kwargs: object) -> VepSettings:
        calls.append(self)
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(VepSettings, "checked", counting)
    settings = VepSettings(window=600)
    if entry == "run_vep":
        run_vep(carbon, EDGE_VCF, FASTA, tmp_path / "out.tsv", settings=settings, on_note=lambda _: None)
    else:
        list(score_variants(carbon, EDGE_VCF, FASTA, settings=settings, on_note=lambda _: None))
    assert calls == [settings]


# ------------------------------------------------------------------ the shortest window and context


@pytest.mark.parametrize(
    ("fields", "field", "needle"),
    [
        ({"window": 1}, "window", "at least 30 bp"),
        ({"window": 29}, "window", "at least 30 bp"),
        ({"recipe": "next_base", "context": 11}, "context", "at least 12 bp"),
        ({"context": 0}, "context", "at least 12 bp"),  # a number given is a number checked
        ({"window_grid": 100_000}, "window_grid", r"half the window \(4096 bp\)"),
        ({"window": 30, "window_grid": 16}, "window_grid", r"half the window \(15 bp\)"),
    ],
)
def test_too_short_windows_and_contexts_are_refused_naming_the_field(
    carbon: Carbon, fields: dict, field: str, needle: str
) -> None:
    with pytest.raises(VepSettingsError, match=needle) as caught:
        VepSettings(**fields).check()
    assert caught.value.field == field
    with pytest.raises(ValueError, match=needle):  # the library applies the same rule
        score_variants(carbon, REF_EQUALS_ALT_VCF, FASTA, **fields)


def test_the_shortest_window_and_context_are_accepted() -> None:
    assert (min_window(), min_context()) == (30, 12)
    VepSettings(window=30, window_grid=15).check()
    VepSettings(recipe="next_base", context=12, context_grid=6).check()


def test_a_window_shorter_than_the_minimum_scores_the_pair_not_the_site(carbon: Carbon) -> None:
    """With --window 1 to 6 every score was a function of the REF>ALT pair alone: G>T at 60,309
    was exactly minus T>G at 60,828 (one marginal of the first 6-mer after <dna>). From the
    shortest accepted window on, the site's bases count."""
    sites = [(60309, "G", "T"), (60828, "T", "G")]
    with Reference(FASTA) as ref:

        def score(pos: int, a: str, b: str, window: int) -> float:
            pair = variant_windows(
                lambda s, e: ref.fetch("20", s, e), pos - 1, a, b, ref.lengths["20"], window
            )
            assert pair is not None
            return naive_window_score(carbon, pair.ref, pair.alt)

        for window in (1, 6):
            gt, tg = (score(*site, window) for site in sites)
            assert gt == pytest.approx(-tg, abs=1e-9)
    rows = {r["pos"]: r for r in score_variants(carbon, REF_EQUALS_ALT_VCF, FASTA, window=min_window())}
    assert abs(rows[60309]["score"] + rows[60828]["score"]) > 1e-4


def test_a_model_too_short_for_the_shortest_window_is_refused() -> None:
    notes: list[str] = []
    fitted = VepSettings().checked_for("cpu", 6, 6, on_note=notes.append)  # <dna> + 5 6-mers
    assert fitted.window == 30 and notes == [
        "window 8192 bp -> 30 bp: a 8192 bp window needs 1367 tokens, the model takes 6"
    ]
    with pytest.raises(ValueError, match="no room for a window of 30 bp"):
        VepSettings().checked_for("cpu", 5, 6)
    with pytest.raises(ValueError, match="no room for a next-base context of 12 bp"):
        VepSettings(recipe="next_base").checked_for("cpu", 2, 6)
