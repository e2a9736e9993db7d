"""The report: table rows beside the published numbers, self-contained HTML, Markdown, JSON."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from hexamer.evals.report import reference_value, report_rows, write_report
from hexamer.evals.runner import EvalResult
from hexamer.evals.tasks.vep_tasks import Brca2

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


@pytest.fixture
def results(tmp_path: Path) -> list[EvalResult]:
    plot = tmp_path / "plots" / "brca2-roc.png"
    plot.parent.mkdir()
    plot.write_bytes(PNG)
    ref = {m: dict(v) for m, v in Brca2.reference.items()}
    ok = [
        EvalResult(
            task="brca2",
            title="BRCA2 VEP",
            level=level,
            headline="auroc",
            metrics={"auroc": v, "n": 10.0},
            ci={"auroc": (v - 0.1, v + 0.05)},
            reference=ref,
            n_examples=10,
            plots=[str(plot)],
        )
        for level, v in (("token", 0.8123), ("bp", 0.8201))
    ]
    skipped = EvalResult(
        task="niah", title="Genome-NIAH", level="token", status="skipped", reason="no data (looked for x)"
    )
    return [*ok, skipped]


def test_rows_use_level_matched_references(results: list[EvalResult]) -> None:
    rows = report_rows(results)
    assert rows[0]["Value [95% CI]"] == "81.23 [71.23, 86.23]"
    assert rows[0]["Carbon-3B"] == "84.63" and rows[1]["Carbon-3B"] == "84.60"  # bp-level: Table S1
    assert rows[1]["Evo2-7B"] == "83.52"
    assert reference_value(results[1], "Carbon-8B", "auroc") == 0.858
    assert rows[2]["Status"].startswith("skipped: no data") and rows[2]["Value [95% CI]"] == "–"


def test_html_is_self_contained(tmp_path: Path, results: list[EvalResult]) -> None:
    path = write_report(results, tmp_path / "r.html", {"model": "tiny"})
    text = path.read_text()
    assert base64.b64encode(PNG).decode() in text and "data:image/png;base64," in text
    assert "81.23 [71.23, 86.23]" in text and "Genome-NIAH" in text and "<script" not in text


def test_markdown_and_json(tmp_path: Path, results: list[EvalResult]) -> None:
    md = write_report(results, tmp_path / "sub" / "r.md", {"model": "tiny"}).read_text()
    assert "| BRCA2 VEP | bp | 10 | auroc | 82.01 [72.01, 87.01] | 84.60 |" in md
    assert "](../plots/brca2-roc.png)" in md
    data = json.loads(write_report(results, tmp_path / "r.json", {"model": "tiny"}).read_text())
    assert data["results"][0]["ci95"]["auroc"] == pytest.approx([0.7123, 0.8623])
    with pytest.raises(ValueError, match="html"):
        write_report(results, tmp_path / "r.txt", {})
