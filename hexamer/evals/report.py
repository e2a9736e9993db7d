"""The evaluation report: one table of task -> headline metric with its 95% CI beside the published
numbers, then every metric of every task, notes and figures. JSON, self-contained HTML (figures
embedded as base64 PNG) or Markdown (figures linked), chosen by the file extension.

Values are shown in % like the tech report. The reference column of a model at bp level uses the
report's bp-level number (Table S1) when there is one, else the headline (token-level) number.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hexamer.evals.published import REFERENCE_MODELS
from hexamer.evals.runner import EvalResult, is_count_metric

__all__ = ["report_rows", "write_report"]

_COLUMNS = ("Task", "Level", "n", "Metric", "Value [95% CI]", *REFERENCE_MODELS, "Status")


def _pct(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "–"
    return f"{100 * value:.2f}"


def _value_ci(r: EvalResult, metric: str) -> str:
    v = r.metrics.get(metric)
    if v is None:
        return "–"
    if is_count_metric(metric):
        return f"{v:,.0f}"
    ci = r.ci.get(metric)
    return _pct(v) + (f" [{_pct(ci[0])}, {_pct(ci[1])}]" if ci else "")


def reference_value(r: EvalResult, model: str, metric: str) -> float | None:
    """The published number of ``model`` for ``metric`` at this result's level (see module doc)."""
    if r.level == "bp":
        bp = r.reference.get(f"{model} bp-level", {})
        if metric in bp:
            return bp[metric]
    return r.reference.get(model, {}).get(metric)


def report_rows(results: Sequence[EvalResult]) -> list[dict[str, str]]:
    """The summary table as strings, one row per (task, level)."""
    rows = []
    for r in results:
        status = r.status if r.status == "ok" else f"{r.status}: {r.reason}"
        if r.status == "ok" and (r.notes or r.n_errors):
            extra = [f"{r.n_errors} errors"] if r.n_errors else []
            status = "ok (" + "; ".join(extra + r.notes) + ")"
        rows.append(
            {
                "Task": r.title,
                "Level": r.level,
                "n": f"{r.n_examples:,}" if r.status == "ok" else "–",
                "Metric": r.headline,
                "Value [95% CI]": _value_ci(r, r.headline) if r.status == "ok" else "–",
                **{m: _pct(reference_value(r, m, r.headline)) for m in REFERENCE_MODELS},
                "Status": status,
            }
        )
    return rows


def _meta_lines(meta: Mapping[str, Any]) -> list[tuple[str, str]]:
    return [(k, v if isinstance(v, str) else json.dumps(v, default=str)) for k, v in meta.items()]


def _sections(results: Sequence[EvalResult]) -> list[EvalResult]:
    return [r for r in results if r.status == "ok"]


# --------------------------------------------------------------------------- markdown


def _md_table(columns: Sequence[str], rows: Sequence[Mapping[str, str]]) -> list[str]:
    def esc(s: str) -> str:
        return str(s).replace("|", "\\|").replace("\n", " ")

    out = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    out += ["| " + " | ".join(esc(row.get(c, "")) for c in columns) + " |" for row in rows]
    return out


def render_markdown(results: Sequence[EvalResult], meta: Mapping[str, Any], base: Path) -> str:
    lines = ["# hexamer zero-shot evaluation", ""]
    lines += [f"- **{k}**: {v}" for k, v in _meta_lines(meta)]
    lines += ["", "Values in %; CI = percentile bootstrap over examples.", ""]
    lines += _md_table(_COLUMNS, report_rows(results))
    for r in _sections(results):
        lines += ["", f"## {r.title} ({r.level} level)", ""]
        lines += [
            f"- data: `{r.data}`, n = {r.n_examples:,} ({r.n_cached:,} from cache), {r.elapsed_s:.1f} s"
        ]
        if r.options:
            lines.append(f"- options: `{json.dumps(r.options, default=str)}`")
        lines += [f"- note: {n}" for n in r.notes]
        lines.append("")
        metric_rows = [{"Metric": m, "Value [95% CI]": _value_ci(r, m)} for m in r.metrics]
        lines += _md_table(("Metric", "Value [95% CI]"), metric_rows)
        if r.reference:
            lines += ["", "Published (in %):", ""]
            ref_rows = [
                {"Model": model, "Numbers": ", ".join(f"{k} {_pct(v)}" for k, v in vals.items())}
                for model, vals in r.reference.items()
            ]
            lines += _md_table(("Model", "Numbers"), ref_rows)
        for plot in r.plots:
            rel = os.path.relpath(plot, base)
            lines += ["", f"![{Path(plot).stem}]({rel})"]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- html

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2em auto;max-width:1200px;color:#222;padding:0 1em}
table{border-collapse:collapse;margin:0.8em 0;font-size:0.92em}
th,td{border:1px solid #ccc;padding:0.3em 0.6em;text-align:right;vertical-align:top}
th:first-child,td:first-child{text-align:left}
td.status{text-align:left;max-width:28em;font-size:0.9em;color:#555}
tr.skipped td,tr.error td{color:#999}
tr.error td.status{color:#b00}
img{max-width:48%;margin:0.3em;border:1px solid #eee}
code{background:#f4f4f4;padding:0 0.2em}
.meta td{text-align:left}
"""


def _img(path: str) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return f'<img alt="{html.escape(Path(path).stem)}" src="data:image/png;base64,{data}">'


def _html_table(
    columns: Sequence[str], rows: Sequence[Mapping[str, str]], classes: Sequence[str] = ()
) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = []
    for i, row in enumerate(rows):
        cls = f' class="{classes[i]}"' if i < len(classes) and classes[i] else ""
        cells = "".join(
            f"<td{' class=status' if c == 'Status' else ''}>{html.escape(str(row.get(c, '')))}</td>"
            for c in columns
        )
        body.append(f"<tr{cls}>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def render_html(results: Sequence[EvalResult], meta: Mapping[str, Any]) -> str:
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>hexamer evaluation</title>"]
    parts.append(f"<style>{_CSS}</style></head><body><h1>hexamer zero-shot evaluation</h1>")
    meta_rows = "".join(
        f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in _meta_lines(meta)
    )
    parts.append(f"<table class='meta'>{meta_rows}</table>")
    parts.append("<p>Values in %; CI = 95% percentile bootstrap over examples.</p>")
    parts.append(_html_table(_COLUMNS, report_rows(results), [r.status for r in results]))
    for r in _sections(results):
        parts.append(f"<h2>{html.escape(r.title)} ({r.level} level)</h2>")
        info = f"data <code>{html.escape(r.data)}</code>, n = {r.n_examples:,} ({r.n_cached:,} from cache), {r.elapsed_s:.1f} s"
        parts.append(f"<p>{info}</p>")
        if r.options:
            parts.append(f"<p>options <code>{html.escape(json.dumps(r.options, default=str))}</code></p>")
        for note in r.notes:
            parts.append(f"<p>note: {html.escape(note)}</p>")
        metric_rows = [{"Metric": m, "Value [95% CI]": _value_ci(r, m)} for m in r.metrics]
        parts.append(_html_table(("Metric", "Value [95% CI]"), metric_rows))
        if r.reference:
            ref_rows = [
                {"Model": model, "Published (%)": ", ".join(f"{k} {_pct(v)}" for k, v in vals.items())}
                for model, vals in r.reference.items()
            ]
            parts.append(_html_table(("Model", "Published (%)"), ref_rows))
        parts.append("<div>" + "".join(_img(p) for p in r.plots if Path(p).is_file()) + "</div>")
    parts.append("</body></html>")
    return "\n".join(parts)


# --------------------------------------------------------------------------- entry point


def default_meta(model: str, fingerprint: str | None = None, command: str | None = None) -> dict[str, Any]:
    from hexamer import __version__
    from hexamer.machine import machine_info

    meta: dict[str, Any] = {
        "model": model,
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "hexamer": __version__,
    }
    if fingerprint:
        meta["model fingerprint"] = fingerprint
    if command:
        meta["command"] = command
    info = machine_info()
    meta["machine"] = f"{info.get('gpu') or info.get('processor')}, torch {info.get('torch')}"
    return meta


def write_report(results: Sequence[EvalResult], path: Path, meta: Mapping[str, Any]) -> Path:
    """Write the report; the format follows the extension (.html/.htm, .md/.markdown, .json)."""
    path = Path(path)
    suffix = path.suffix.lower()
    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix in (".html", ".htm"):
        text = render_html(results, meta)
    elif suffix in (".md", ".markdown"):
        text = render_markdown(results, meta, path.parent.resolve())
    elif suffix == ".json":
        text = json.dumps(
            {"meta": dict(meta), "results": [r.as_dict() for r in results]}, indent=2, default=str
        )
    else:
        raise ValueError(f"{path}: the report is written as .html, .md or .json")
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path
