"""hexamer.distributed.cluster: a PoolSpec is range-checked when built, before any actor starts."""

from __future__ import annotations

import pytest

from hexamer.distributed import PoolSpec
from hexamer.distributed.cluster import DEFAULT_CPUS_PER_THREAD, MAX_WORKERS


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("workers", 0, "workers must be between 1 and"),
        ("workers", MAX_WORKERS + 1, "workers must be between 1 and"),
        ("threads", 0, "threads must be between 1 and 1024"),
        ("num_cpus", 0.0, "num_cpus must be above 0"),
        ("num_cpus", 2000.0, "num_cpus must be above 0"),
        ("num_gpus", -1.0, "num_gpus must be between 0 and 64"),
        ("num_gpus", 65.0, "num_gpus must be between 0 and 64"),
    ],
)
def test_a_spec_out_of_range_is_refused(field: str, value: float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PoolSpec(**{field: value})


def test_actors_reserve_half_a_cpu_per_thread_unless_told() -> None:
    assert PoolSpec(threads=4).cpus_per_worker == 4 * DEFAULT_CPUS_PER_THREAD
    assert PoolSpec(threads=4, num_cpus=3.0).cpus_per_worker == 3.0
