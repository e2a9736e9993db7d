"""``hexamer generate`` and ``hexamer score``: batch jobs over sequence files.

A bad record never stops a job: it is reported (stderr, and a ``status``/``error`` column in table
outputs) and every other record is processed. Outputs are written atomically.

Importing this module registers both commands: :mod:`~hexamer.cli.generate_cmd` and
:mod:`~hexamer.cli.score_cmd`; what they share is in :mod:`~hexamer.cli.sequence_jobs`; the jobs
themselves are :mod:`hexamer.generation_job` and :mod:`hexamer.sequence_scores`.
"""

from hexamer.cli import generate_cmd, score_cmd  # noqa: F401  (importing registers the commands)
