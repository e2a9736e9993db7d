"""``hexamer quantize``: what the user can fix is exit 2 with one ``error:`` line naming it, before
any weight is read; a failure while writing the folder is exit 1; no half-written folder either way."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hexamer.synthetic import build_carbon_folder
from hexamer.testing import poison_weights
from hexamer.testing.cli import error_message, run, run_ok


@pytest.fixture()
def source(tiny_folder: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(tiny_folder, tmp_path / "src"))


def test_input_errors_exit_2_naming_the_problem(source: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    broken_config = Path(shutil.copytree(source, tmp_path / "badcfg"))
    (broken_config / "config.json").write_text("{not json", encoding="utf-8")
    nan = poison_weights(build_carbon_folder(tmp_path / "nan"), float("nan"))
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("x", encoding="utf-8")
    quantized = tmp_path / "q"
    run_ok(["quantize", source, quantized])
    cases = [
        (empty, tmp_path / "o1", "no config.json"),
        (tmp_path / "missing", tmp_path / "o2", "no config.json"),
        (broken_config, tmp_path / "o3", "config.json"),
        (nan, tmp_path / "o4", "NaN"),
        (quantized, tmp_path / "o5", "already quantized"),
        (source, busy, "already exists"),
        (source, source, "already exists"),
    ]
    for src, out, words in cases:
        result = run(["quantize", src, out])
        assert result.exit_code == 2, (src, result.output)
        message = error_message(result)
        assert words in message and "\n" not in message, message
        assert out in (busy, source) or not out.exists()


def test_a_failure_while_writing_exits_1(
    source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import safetensors.torch

    def disk_full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(safetensors.torch, "save_file", disk_full)
    out = tmp_path / "q"
    result = run(["quantize", source, out])
    assert result.exit_code == 1
    assert error_message(result).startswith(f"writing {out} failed:") and "No space left" in error_message(
        result
    )
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".q-")]
