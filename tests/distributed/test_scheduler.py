"""run_shards: retries, failures after max_attempts, and no silent end when every worker is gone."""

from __future__ import annotations

import pytest

from hexamer.distributed.scheduler import run_shards

ray = pytest.importorskip("ray")


@ray.remote(num_cpus=0.25, max_restarts=0)
class Flaky:
    """Fails shard 2 always; dies (for good) on shard 5."""

    def run(self, shard: int) -> int:
        if shard == 2:
            raise ValueError("bad shard")
        if shard == 5:
            import os

            os._exit(1)
        return shard * 10


def test_results_retries_and_failures(local_ray) -> None:
    actors = [Flaky.remote(), Flaky.remote()]
    done: dict[int, int] = {}
    failed: dict[int, tuple[str, int]] = {}
    run_shards(
        actors,
        iter(range(5)),
        lambda actor, shard: actor.run.remote(shard),
        done.__setitem__,
        lambda shard, reason, attempts: failed.__setitem__(shard, (reason, attempts)),
        max_attempts=3,
    )
    assert done == {0: 0, 1: 10, 3: 30, 4: 40}
    assert failed[2][1] == 3 and "bad shard" in failed[2][0]
    for actor in actors:
        ray.kill(actor)


def test_every_worker_dead_is_an_error_not_a_short_output(local_ray) -> None:
    actors = [Flaky.remote()]
    with pytest.raises(RuntimeError, match="every Ray worker died"):
        run_shards(
            actors,
            iter([5, 6, 7]),
            lambda actor, shard: actor.run.remote(shard),
            lambda shard, value: None,
            lambda shard, reason, attempts: None,
            max_attempts=1,
        )
