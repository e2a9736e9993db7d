"""What the variant-effect tasks (BRCA2, TraitGym, ClinVar) share: their data is one table of variants
(``chrom``, ``pos``, ``ref``, ``alt`` plus the task's own columns) in the public dataset's layout, and
each record starts with the variant it scores."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from hexamer.evals.data import find_file, read_rows
from hexamer.evals.task import Example, Record, Task

__all__ = ["VARIANT_COLUMNS", "VARIANT_FIELDS", "VariantTableTask"]

#: the columns every variant table has
VARIANT_COLUMNS = ("chrom", "pos", "ref", "alt")
#: the fields every example and record of a variant task starts with (see
#: :func:`hexamer.evals.data.variant_example`)
VARIANT_FIELDS = ("id", "row", *VARIANT_COLUMNS)


class VariantTableTask(Task):
    """A task whose data is one table of variants."""

    #: the table under the ``--data`` folder, the first that exists is read (``--data`` may be the file)
    file_names: ClassVar[tuple[str, ...]] = ()

    def table_path(self, data: Path) -> Path:
        """The task's table: ``data`` itself when it is a file, else the first of :attr:`file_names` under it."""
        return find_file(Path(data), self.file_names, self.title)

    def read_variants(
        self,
        path: Path,
        *,
        required: Sequence[str],
        optional: Sequence[str],
        limit: int | None,
        seed: int,
    ) -> list[dict[str, Any]]:
        """The rows of the table at ``path`` (the ``--limit`` sample) with :data:`VARIANT_COLUMNS` and
        ``required``, plus whichever ``optional`` columns exist; a file without them raises
        :class:`~hexamer.evals.task.DatasetSchemaError` listing :attr:`expected_columns`."""
        return read_rows(
            path,
            required=[*VARIANT_COLUMNS, *required],
            optional=list(optional),
            expected=self.expected_columns,
            limit=limit,
            seed=seed,
        )

    @staticmethod
    def variant_record(e: Example, *fields: str) -> Record:
        """A record that starts with the example's :data:`VARIANT_FIELDS`, then ``fields`` (all present in ``e``)."""
        return {k: e[k] for k in (*VARIANT_FIELDS, *fields)}
