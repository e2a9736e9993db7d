"""The engine thread's jobs (scoring, VEP, embeddings) honour a deadline: the waiter gets
``TimedOut`` on time, and a job still queued when its deadline passes is never started."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path

import pytest

from hexamer.engine import Request, RequestState, SamplingParams
from hexamer.server.app import create_app
from hexamer.server.testing import running_server
from hexamer.server.worker import Abort, Add, Cancel, Shutdown, Submission, TimedOut


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


def test_commands_are_typed_and_requests_enter_only_through_engine_add(tiny_folder: Path) -> None:
    """The engine thread takes typed commands; a request reaches the engine only by ``Engine.add``,
    so one the engine refuses (here: longer than ``max_model_len``, sent without the endpoint's
    check) ends at once with a 400 naming why, and the engine never holds it."""
    app = create_app(tiny_folder, max_num_seqs=2, max_model_len=64)
    with running_server(app):
        state = app.state.hexamer
        worker = state.worker
        long = Request([state.tokenizer.layout.begin_id] * 60, SamplingParams(max_bp=60))
        ok = state.engine.make_request([state.tokenizer.layout.begin_id], SamplingParams(max_bp=12, seed=0))

        async def main() -> list[tuple[int, int, bool]]:
            events: asyncio.Queue[tuple[int, int, bool]] = asyncio.Queue()
            loop = asyncio.get_running_loop()
            subs = [Submission(long, 0, loop, events), Submission(ok, 1, loop, events)]
            worker.submit(subs)
            seen = []
            while not any(finished and index == 1 for index, _, finished in seen):
                seen.append(await asyncio.wait_for(events.get(), 30))
            assert subs[0].error_status == 400 and "max_model_len" in (subs[0].error or "")
            assert subs[1].error is None
            return seen

        seen = asyncio.run(main())
    assert seen[0] == (0, 0, True)  # refused at the door, before any step
    assert len(ok.bases()) == 12 and long.state is not RequestState.RUNNING
    with pytest.raises(dataclasses.FrozenInstanceError):  # commands are values
        Abort("stop").reason = "other"  # type: ignore[misc]
    assert Add(()) == Add(()) and Cancel(()) != Add(()) and Shutdown() == Shutdown()


class _CountingLoop:
    """An event loop proxy that counts the engine thread's hand-offs to it."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop, self.handoffs = loop, 0

    def call_soon_threadsafe(self, *args: object) -> object:
        self.handoffs += 1
        return self.loop.call_soon_threadsafe(*args)  # type: ignore[arg-type]


def test_a_step_wakes_each_event_loop_once_for_all_its_requests(tiny_folder: Path) -> None:
    """Requests decoded together get their progress in one hand-off per step (not one each), and
    every request still sees each of its steps, in order, ending with ``finished``."""
    app = create_app(tiny_folder, max_num_seqs=4, max_model_len=64)
    with running_server(app):
        state = app.state.hexamer
        begin = state.tokenizer.layout.begin_id
        reqs = [state.engine.make_request([begin], SamplingParams(max_bp=30, seed=i)) for i in range(4)]

        async def main() -> tuple[list[tuple[int, int, bool]], int]:
            events: asyncio.Queue[tuple[int, int, bool]] = asyncio.Queue()
            counting = _CountingLoop(asyncio.get_running_loop())
            subs = [Submission(r, i, counting, events) for i, r in enumerate(reqs)]  # type: ignore[arg-type]
            state.worker.submit(subs)
            seen: list[tuple[int, int, bool]] = []
            while sum(finished for _, _, finished in seen) < len(reqs):
                seen.append(await asyncio.wait_for(events.get(), 30))
            return seen, counting.handoffs

        seen, handoffs = asyncio.run(main())
    for i, req in enumerate(reqs):
        counts = [count for index, count, _ in seen if index == i]
        assert counts == list(range(1, req.n_generated + 1)), counts
        assert [f for index, _, f in seen if index == i][-1] is True
    steps = max(r.n_generated for r in reqs)
    assert handoffs <= steps + 1, f"{handoffs} hand-offs for {steps} steps of {len(reqs)} requests"
