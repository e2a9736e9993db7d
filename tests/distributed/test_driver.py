"""hexamer.distributed.driver: what every driver checks before any actor starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from hexamer.distributed.driver import ShardRun, check_job, pool_for


@pytest.mark.parametrize("attempts", [0, 101])
def test_tries_per_shard_out_of_range_are_refused(attempts: int, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_attempts must be between 1 and 100"):
        ShardRun(tmp_path / "out.tsv", max_attempts=attempts)


def test_notes_and_progress_go_where_asked(tmp_path: Path) -> None:
    notes: list[str] = []
    done: list[int] = []
    ShardRun(tmp_path / "o.tsv").note("nobody hears this")  # no hook: nothing to call
    run = ShardRun(tmp_path / "o.tsv", on_note=notes.append, on_progress=done.append)
    run.note("cut the window")
    run.progress(4)
    assert (notes, done) == (["cut the window"], [4])


def test_a_missing_output_folder_or_input_fails_first(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="output folder"):
        check_job(tmp_path / "nowhere" / "out.tsv", {})
    with pytest.raises(FileNotFoundError, match="no such sequence file"):
        check_job(tmp_path / "out.tsv", {"sequence": tmp_path / "missing.fa"})


def test_pool_must_be_a_pool_or_a_spec() -> None:
    with pytest.raises(TypeError, match="WorkerPool or a PoolSpec"), pool_for({"workers": 2}, "model", 8):  # type: ignore[arg-type]
        pass


@pytest.mark.parametrize(("entry", "inputs"), [("run_vep", ("in.vcf", "ref.fa")), ("ism", ("ref.fa",))])
def test_pool_options_as_keywords_say_where_they_go(
    entry: str, inputs: tuple[str, ...], tmp_path: Path
) -> None:
    import hexamer.distributed as distributed

    with pytest.raises(TypeError, match=r"pool=PoolSpec\(threads=4, workers=8\)"):
        getattr(distributed, entry)("model", *inputs, tmp_path / "out.tsv", workers=8, threads=4)
