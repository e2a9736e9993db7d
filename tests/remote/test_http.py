"""The token gate: at most ``budget`` prompt tokens in flight, a longer request alone."""

from __future__ import annotations

import asyncio

import pytest

from hexamer.remote.http import TokenGate


def test_token_gate_bounds_the_tokens_in_flight() -> None:
    gate = TokenGate(10)
    peak = 0

    async def one(n: int) -> None:
        nonlocal peak
        async with gate.hold(n):
            peak = max(peak, gate.used)
            await asyncio.sleep(0.001)

    async def main() -> None:
        await asyncio.gather(*(one(n) for n in (4, 4, 4, 25, 3, 6)))

    asyncio.run(main())
    assert peak == 10 and gate.used == 0  # never above the budget; the 25-token request went alone
    with pytest.raises(ValueError, match="token budget"):
        TokenGate(0)
