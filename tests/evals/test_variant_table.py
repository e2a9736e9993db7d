"""The variant-table base of BRCA2, TraitGym and ClinVar: where the table is, its column check, and
the fields every record starts with."""

from __future__ import annotations

from pathlib import Path

import pytest

from hexamer.evals.data import ROW_INDEX
from hexamer.evals.task import DatasetSchemaError
from hexamer.evals.tasks.variant_table import VARIANT_FIELDS, VariantTableTask
from hexamer.evals.tasks.vep_tasks import Brca2
from tests.evals.lookalike import write_brca2, write_parquet


def test_table_path_and_read_variants(tmp_path: Path, human_dna: str) -> None:
    path = write_brca2(tmp_path, human_dna, n=6, window=60)
    task = Brca2()
    assert task.table_path(tmp_path) == path == task.table_path(path)
    rows = task.read_variants(path, required=["class"], optional=["region", "absent"], limit=4, seed=0)
    assert len(rows) == 4
    assert set(rows[0]) == {"chrom", "pos", "ref", "alt", "class", "region", ROW_INDEX}
    with pytest.raises(FileNotFoundError, match="BRCA2 VEP"):
        task.table_path(tmp_path / "nowhere")


def test_missing_variant_column_lists_the_expected_ones(tmp_path: Path) -> None:
    bad = write_parquet(tmp_path / "t.parquet", [{"chrom": "1", "pos": 5, "ref": "A"}])
    with pytest.raises(DatasetSchemaError) as err:
        Brca2().read_variants(bad, required=[], optional=[], limit=None, seed=0)
    message = str(err.value)
    assert "missing column(s) alt;" in message and "ref_seq: reference window" in message


def test_variant_record_starts_with_the_variant() -> None:
    e = {"id": "0:1:5:A>G", "row": 0, "chrom": "1", "pos": 5, "ref": "A", "alt": "G", "y": 1, "extra": 2}
    rec = VariantTableTask.variant_record(e, "y")
    assert list(rec) == [*VARIANT_FIELDS, "y"] and rec["y"] == 1
