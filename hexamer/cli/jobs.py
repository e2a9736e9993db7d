"""``hexamer generate`` and ``hexamer score``: batch jobs over sequence files.

A bad record never stops a job: it is reported (stderr, and a ``status``/``error`` column in table
outputs) and every other record is processed. Outputs are written atomically.

Importing this module registers both commands: :mod:`~hexamer.cli.generate_cmd` and
:mod:`~hexamer.cli.score_cmd`; what they share is in :mod:`~hexamer.cli.sequence_jobs`; the jobs
themselves are :mod:`hexamer.generation_job` and :mod:`hexamer.sequence_scores`.
"""

from hexamer.cli.generate_cmd import generate
from hexamer.cli.score_cmd import score
from hexamer.cli.sequence_jobs import (
    count_records,
    fail_if_none_ok,
    load_carbon,
    progress_bar,
)

_progress = progress_bar  # the name earlier releases had

__all__ = [
    "count_records",
    "fail_if_none_ok",
    "generate",
    "load_carbon",
    "progress_bar",
    "score",
]
