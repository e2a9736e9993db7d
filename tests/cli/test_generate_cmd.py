"""``hexamer generate``: option checks made before any work (lengths against the model's context,
``--spec-k`` with or without ``--draft``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hexamer.testing.cli import error_message, run, usage_error


def test_a_config_with_an_absurd_context_is_refused_by_info_and_generate(
    tiny_folder: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "model"
    shutil.copytree(tiny_folder, folder)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    (folder / "config.json").write_text(
        json.dumps(config | {"max_position_embeddings": 1e12}), encoding="utf-8"
    )
    for args in (["info", "-m", folder], ["generate", "-m", folder, "--max-bp", "1000000000", "ACGTAC"]):
        result = run(args)
        assert result.exit_code == 2
        message = error_message(result)
        assert message.startswith(f"{folder / 'config.json'}: 'max_position_embeddings'")


def test_max_bp_beyond_the_context_is_a_usage_error_before_any_work(tiny_folder: Path) -> None:
    exc = usage_error(["generate", "-m", tiny_folder, "--max-bp", "1000000000", "ACGTAC"])
    assert exc.format_message().startswith("Invalid value for '--max-bp': max_bp=1,000,000,000")
    assert "context of 2,048 tokens" in exc.format_message()


@pytest.mark.parametrize("value", ["abc", "-5", "0", "99999", "1.5"])
@pytest.mark.parametrize("draft", [False, True])
def test_spec_k_is_checked_at_parse_time_with_or_without_draft(
    tiny_folder: Path, value: str, draft: bool
) -> None:
    args = ["generate", "-m", tiny_folder, "ACGTAC", "--spec-k", value]
    exc = usage_error([*args, "--draft", tiny_folder] if draft else args)
    assert "--spec-k" in exc.format_message()


@pytest.mark.parametrize("command", ["generate", "score"])
@pytest.mark.parametrize("prefix", ["</dna><|endoftext|>", "<dna>", "<x>text"])
def test_prefix_is_metadata_tags_only_at_parse_time(tiny_folder: Path, command: str, prefix: str) -> None:
    exc = usage_error([command, "-m", "/nonexistent/model", "ACGTAC", "--prefix", prefix])
    assert exc.format_message().startswith("Invalid value for '--prefix': ")
    assert "metadata tags only" in exc.format_message()
