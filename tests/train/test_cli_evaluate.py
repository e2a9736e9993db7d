"""``hexamer train`` through typer, and the held-out baselines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer

from hexamer.cli.train_cmd import register
from hexamer.testing.cli import error_message, run, run_ok
from hexamer.train.data import Segment
from hexamer.train.evaluate import composition_accuracy, markov_accuracy

TINY = [
    "--window-bp", "120", "--batch-size", "2", "--warmup-steps", "1", "--hidden-size", "32",
    "--intermediate-size", "64", "--num-layers", "1", "--num-heads", "2", "--num-kv-heads", "1",
    "--context-length", "64", "--eval-every", "0", "--save-every", "0", "--threads", "1", "--device", "cpu",
]  # fmt: skip


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    app = typer.Typer()

    @app.command()
    def other() -> None:  # a second command, so 'train' is a subcommand as in the real CLI
        """Unused."""

    register(app)
    return app


def test_cli_trains_and_resumes(app: typer.Typer, dna_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["train", str(dna_file), "--output-dir", str(out), "--steps", "4", *TINY, "--quiet"]
    run_ok([*args, "--stop-at", "2"])
    assert (out / "checkpoint-0000002" / "optimizer.safetensors").is_file()
    second = run_ok([*args, "--resume", "--json"])
    summary = json.loads(second.stdout.strip().splitlines()[-1])
    assert summary["step"] == 4 and 0 <= summary["val_accuracy"] <= 1
    assert summary["model"] == str(out / "final") and (out / "final" / "model.safetensors").is_file()
    assert summary["curves"] == str(out / "curves.png")
    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # beside metrics.jsonl
    saved = json.loads((out / "train_config.json").read_text())
    assert saved["steps"] == 4 and saved["resume"] is True


def test_cli_config_file_and_overrides(app: typer.Typer, tmp_path: Path) -> None:
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"data": ["x.fa"], "steps": 7, "lr": 0.01}))
    res = run_ok(["train", "--config", str(cfg), "--lr", "0.002", "--schedule", "wsd", "--file-tag", "x.fa=<t>",
              "--no-tie-embeddings", "--print-config"])  # fmt: skip
    printed = json.loads(res.output)
    assert printed["steps"] == 7 and printed["lr"] == 0.002 and printed["schedule"] == "wsd"
    assert printed["file_tags"] == {"x.fa": "<t>"} and printed["tie_embeddings"] is False


def test_cli_errors_exit_2(app: typer.Typer, tmp_path: Path) -> None:
    empty = tmp_path / "e.fa"
    empty.write_text("")
    res = run(["train", str(empty), "--output-dir", str(tmp_path / "o"), *TINY])
    assert res.exit_code == 2 and "empty" in error_message(res)
    res = run(["train", "x.fa", "--init", "huge"])
    assert res.exit_code == 2 and "huge" in error_message(res)
    res = run(["train", "x.fa", "--objective", "kl"])
    assert res.exit_code == 2
    res = run(["train", "x.fa", "--file-tag", "notag"])
    assert res.exit_code == 2 and "PATH=TAG" in error_message(res)


def test_baselines_on_a_periodic_sequence() -> None:
    seq = "ACGTTGCA" * 200  # every 2-mer of the period is distinct: order >= 2 predicts exactly
    train = [Segment("a", seq[:1200])]
    windows = [("", seq[1200:1560])]
    # a window's first bases have no context inside it: lower orders take over (back-off), so only
    # the first two bases (orders 0 and 1) can miss
    assert markov_accuracy(train, windows, order=8, aligned=False) >= 358 / 360
    # aligned: base j of a 6-mer from the bases before the 6-mer; only the first 6-mer is blind
    assert markov_accuracy(train, windows, order=8, aligned=True) >= 354 / 360
    assert composition_accuracy(train, windows) == pytest.approx(0.25)


def test_baselines_skip_oov_chunks() -> None:
    train = [Segment("a", "A" * 30)]
    windows = [("", "AAAAAANAAAAAAAAA")]  # the chunk holding N is not scored (as by the model)
    assert composition_accuracy(train, windows) == 1.0


def test_cli_trains_on_standard_input_and_reads_a_config_from_it(
    app: typer.Typer, dna_file: Path, tmp_path: Path
) -> None:
    """`hexamer train -` saves the piped FASTA in the run folder (so the run can resume from it);
    `--config -` reads the JSON config from standard input; stdin is read once; folders refuse -."""
    out = tmp_path / "run"
    args = ["--output-dir", str(out), "--steps", "2", *TINY, "--quiet", "--json"]
    res = run_ok(["train", "-", *args], input=dna_file.read_text())
    saved = out / "stdin-train.fa"
    assert saved.read_text() == dna_file.read_text()
    assert json.loads((out / "train_config.json").read_text())["data"] == [str(saved)]
    assert json.loads(res.stdout.strip().splitlines()[-1])["step"] == 2
    config = json.dumps({"data": [str(dna_file)], "steps": 1, "output_dir": str(tmp_path / "c")})
    res = run_ok(["train", "--config", "-", "--print-config"], input=config)
    assert json.loads(res.stdout)["steps"] == 1 and json.loads(res.stdout)["data"] == [str(dna_file)]
    twice = run(["train", "-", "--config", "-", *args], input=config)
    assert twice.exit_code == 2 and "can be read once" in error_message(twice)
    for option in ("--output-dir", "--resume-from"):
        res = run(["train", str(dna_file), *TINY, option, "-"])
        assert res.exit_code == 2 and f"{option} cannot be '-'" in error_message(res)


def test_validation_data_and_its_tag_from_standard_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    from hexamer.cli.train_cmd import spool_stdin_data
    from hexamer.train.config import TrainConfig

    monkeypatch.setattr("sys.stdin", io.StringIO(">v\nACGTACGT\n"))
    config = TrainConfig(
        data=["a.fa"], val_data=["-"], file_tags={"-": "<t>"}, output_dir=str(tmp_path / "r")
    )
    spooled = spool_stdin_data(config)
    saved = tmp_path / "r" / "stdin-val.fa"
    assert spooled.val_data == [str(saved)] and saved.read_text() == ">v\nACGTACGT\n"
    assert spooled.file_tags == {str(saved): "<t>"} and spooled.data == ["a.fa"]
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    with pytest.raises(ValueError, match="standard input is empty"):
        spool_stdin_data(config)
