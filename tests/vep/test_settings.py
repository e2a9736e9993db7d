"""VepSettings: built once, passed whole, checked once; the keyword path gives the same rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from hexamer import Carbon
from hexamer.vep import VepSettings, run_vep, score_variants
from tests.vep.conftest import EDGE_VCF, FASTA


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
