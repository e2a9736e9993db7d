"""The engine thread's jobs (scoring, VEP, embeddings) honour a deadline: the waiter gets
``TimedOut`` on time, and a job still queued when its deadline passes is never started."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from hexamer.server.app import create_app
from hexamer.server.testing import running_server
from hexamer.server.worker import TimedOut


def test_a_job_still_queued_at_its_deadline_never_runs(tiny_folder: Path) -> None:
    app = create_app(tiny_folder, max_num_seqs=2, max_model_len=64)
    ran: list[str] = []
    with running_server(app):
        worker = app.state.hexamer.worker

        async def main() -> float:
            slow = asyncio.ensure_future(worker.run_job(lambda: time.sleep(1.5) or "slow"))
            await asyncio.sleep(0.05)  # the slow job has the engine thread
            start = time.perf_counter()
            with pytest.raises(TimedOut):
                await worker.run_job(lambda: ran.append("late"), time.monotonic() + 0.2)
            waited = time.perf_counter() - start
            assert await slow == "slow"
            assert await worker.run_job(lambda: "after") == "after"  # jobs run in order: the late one is past
            return waited

        waited = asyncio.run(main())
    assert 0.15 < waited < 1.0, f"the waiter got TimedOut after {waited:.2f} s, not at its 0.2 s deadline"
    assert ran == [], "a job whose client had its 504 still ran"
