"""``hexamer.vep`` with a remote scorer: same rows, statuses and scores as the local model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hexamer import Carbon
from hexamer.testing.cli import error_message, run, run_json, usage_error
from hexamer.vep import run_vep, score_variants

DATA = Path(__file__).resolve().parents[1] / "data" / "vep"
FASTA = DATA / "chr20_slice.fa.gz"


@pytest.fixture(scope="module")
def remote(vllm_url: str, tiny_folder: Path):
    with Carbon.from_server(vllm_url, tokenizer=tiny_folder, top_n=4608) as m:
        yield m


@pytest.mark.parametrize(
    "vcf,recipe,options",
    [
        ("chr20_slice.vcf", "window", {"window": 30}),  # the shortest window
        ("chr20_slice.vcf", "next_base", {"context": 120, "context_grid": 60}),
        pytest.param(
            "chr20_slice.vcf", "window", {"window": 120, "rc_average": True}, marks=pytest.mark.slow
        ),
        pytest.param("edge_cases.vcf", "window", {"window": 60}, marks=pytest.mark.slow),
        pytest.param(
            "edge_cases.vcf", "next_base", {"context": 60, "context_grid": 6}, marks=pytest.mark.slow
        ),
    ],
)
def test_remote_vep_equals_local(remote, local: Carbon, vcf: str, recipe: str, options: dict) -> None:
    got = list(score_variants(remote, DATA / vcf, FASTA, recipe=recipe, **options))
    want = list(score_variants(local, DATA / vcf, FASTA, recipe=recipe, **options))
    assert [(r["record"], r["alt_index"], r["status"], r["reason"]) for r in got] == [
        (r["record"], r["alt_index"], r["status"], r["reason"]) for r in want
    ]
    assert any(r["status"] == "ok" for r in got)
    for g, w in zip(got, want, strict=True):
        if w["score"] is None:
            assert g["score"] is None
        else:
            assert g["score"] == pytest.approx(w["score"], abs=1e-4)


def test_run_vep_remote_writes_output(remote, tmp_path: Path) -> None:
    out = tmp_path / "scored.tsv"
    result = run_vep(
        remote, DATA / "chr20_slice.vcf", FASTA, out, recipe="next_base", context=60, context_grid=6
    )
    assert result.n_rows >= 9 and result.status_counts.get("ok", 0) >= 1
    assert out.read_text().count("\n") == result.n_rows + 1


def test_cli_vep_server(vllm_url: str, tiny_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "scored.jsonl"
    args = ["vep", "--vcf", str(DATA / "chr20_slice.vcf"), "--fasta", str(FASTA), "--out", str(out)]
    args += [
        "--server",
        vllm_url,
        "--tokenizer",
        str(tiny_folder),
        "--recipe",
        "next_base",
        "--context",
        "60",
        "--context-grid",
        "6",
        "--top-n",
        "4608",
    ]
    summary = run_json(args)
    assert summary["output"] == str(out) and out.exists()
    assert sum(summary["status_counts"].values()) == summary["n_rows"] > 0
    bad = usage_error([*args[:7], "--server", vllm_url, "--model", str(tiny_folder)])
    assert "not both" in bad.format_message()


def _vep_args(url: str, tiny_folder: Path, out: Path, *extra: str) -> list[str]:
    return [
        "vep",
        "--vcf",
        str(DATA / "chr20_slice.vcf"),
        "--fasta",
        str(FASTA),
        "--out",
        str(out),
        "--server",
        url,
        "--tokenizer",
        str(tiny_folder),
        "--top-n",
        "4608",
        *extra,
    ]


def test_next_base_default_context_fits_a_served_context(
    local: Carbon, tiny_folder: Path, tmp_path: Path
) -> None:
    """A server whose max_model_len is the model's context: the default next-base context used to
    fill it exactly, so prompt + the one completion token overflowed (HTTP 400 on every site)."""
    from tests.remote.fake_server import FakeSettings, make_app, serve

    settings = FakeSettings(max_model_len=local.context_length)
    with serve(make_app(local, settings)) as url:
        out = tmp_path / "scored.jsonl"
        run_json(_vep_args(url, tiny_folder, out, "--recipe", "next_base"))
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert {r["status"] for r in rows} == {"ok", "skipped"}  # the insertions are skipped
        # the context was fitted, and the CLI said so with the old and new values
        with Carbon.from_server(url, tokenizer=tiny_folder, top_n=4608) as remote:
            assert remote.max_prompt_tokens == local.context_length - 1
            notes: list[str] = []
            list(
                score_variants(
                    remote, DATA / "chr20_slice.vcf", FASTA, recipe="next_base", on_note=notes.append
                )
            )
        assert any(n.startswith("context 24576 bp -> ") for n in notes)
    # the remote score path leaves the completion token room as well: the same rule on a server
    # with a short context (a full 2,048-token one answers ~9 M top-N entries, minutes of JSON)
    short = FakeSettings(max_model_len=64)
    with (
        serve(make_app(local, short)) as url,
        Carbon.from_server(url, tokenizer=tiny_folder, top_n=4608) as remote,
    ):
        assert remote.max_prompt_tokens == 63
        longest = "ACGTAC" * (remote.max_prompt_tokens - 1)
        assert remote.score(longest).n_scored == len(longest)
        with pytest.raises(ValueError, match="less the one completion token"):
            remote.check_sequence(longest + "ACGTAC")


def test_a_job_where_nothing_was_scored_exits_non_zero(
    local: Carbon, tiny_folder: Path, tmp_path: Path
) -> None:
    from tests.remote.fake_server import FakeSettings, make_app, serve

    settings = FakeSettings(fail_first=10**6, fail_status=400)  # a server refusing every request
    with serve(make_app(local, settings)) as url:
        out = tmp_path / "scored.tsv"
        result = run(_vep_args(url, tiny_folder, out, "--window", "60"))
        assert result.exit_code == 1 and "no variant was scored" in error_message(result)
        assert out.exists()  # every record is still in the output, with its reason
        lines = out.read_text().splitlines()
        assert len(lines) == 10 and all("\tfailed\t" in line for line in lines[1:])
