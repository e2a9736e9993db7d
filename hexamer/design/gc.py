"""Exact feasibility of GC-content bounds (whole sequence and every sliding window) as a system of
difference constraints.

With ``S_i`` the number of G/C among the first ``i`` bases, every GC rule is a bound on a difference
``S_v - S_u``: a base that may (must) be G/C gives ``0 <= S_{i+1} - S_i <= 1`` (``= 1``), a window
``[s, s+w)`` gives ``lo <= S_{s+w} - S_s <= hi``, the whole sequence ``S_N - S_0``. Such a system
with integer bounds has an integer solution iff its constraint graph has no negative cycle, and
fixing a decoded prefix ``S_0..S_i`` keeps it feasible iff every fixed pair ``p, q`` satisfies
``S_q - S_p <= D[p, q]``, the shortest-path distance. So one all-pairs table, computed before
decoding, answers "can the rest still be completed?" exactly for each next base in O(i).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["GcPlan", "count_bounds", "shortest_paths"]

_INF = 1 << 40
#: above this many nodes, Johnson's algorithm (scipy, C) replaces the numpy Floyd-Warshall
_FLOYD_MAX = 300
#: without scipy, the numpy Floyd-Warshall serves up to this many nodes (about 10 s at the limit)
_FLOYD_LIMIT = 1200


def shortest_paths(n: int, edges: dict[tuple[int, int], int]) -> tuple[np.ndarray, bool]:
    """All-pairs shortest-path lengths ``(n, n)`` int64 (``_INF``-ish where unreachable) of a graph
    with integer weights, and whether it has no negative cycle."""
    try:
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import NegativeCycleError, shortest_path

        have_scipy = True
    except ImportError:  # scipy is optional: numpy alone serves shorter sequences
        if n > _FLOYD_LIMIT:
            raise ValueError(
                f"GC rules over more than {_FLOYD_LIMIT - 1} bases need scipy (pip install scipy)"
            ) from None
        have_scipy = False
    if n <= _FLOYD_MAX or not have_scipy:
        d = np.full((n, n), _INF, dtype=np.int64)
        np.fill_diagonal(d, 0)
        for (u, v), w in edges.items():
            d[u, v] = min(d[u, v], w)
        for k in range(n):  # Floyd-Warshall, one vectorised update per pivot
            np.minimum(d, d[:, k : k + 1] + d[k : k + 1, :], out=d)
        return d, bool((np.diagonal(d) >= 0).all())
    (us, vs), ws = zip(*edges.keys(), strict=True), list(edges.values())
    # a sparse graph's zero entries may read as "no edge", so zero weights become eps > 0: a path
    # has fewer than n hops, so a length is off by less than 1/4 and rounds back down exactly, and
    # a cycle's sign does not change (integer lengths)
    eps = 1.0 / (4.0 * n)
    data = np.array([w if w != 0 else eps for w in ws], dtype=np.float64)
    graph = csr_matrix((data, (np.array(us), np.array(vs))), shape=(n, n))
    try:
        dist = shortest_path(graph, method="J", directed=True)
    except NegativeCycleError:
        return np.zeros((n, n), dtype=np.int64), False
    dist[~np.isfinite(dist)] = _INF
    return np.floor(dist + 1e-9).astype(np.int64), True


def count_bounds(lo: float, hi: float, n: int) -> tuple[int, int]:
    """G/C counts allowed in ``n`` bases for a fraction range ``[lo, hi]`` (inclusive, with a
    1e-9 tolerance so that 0.5 of 10 bases is 5)."""
    return math.ceil(lo * n - 1e-9), math.floor(hi * n + 1e-9)


class GcPlan:
    """The shortest-path table of one sequence's GC rules; ``feasible_next`` tells which of "next base
    is G/C" / "is A/T" keep the rules satisfiable."""

    def __init__(
        self,
        can_gc: list[bool],
        can_at: list[bool],
        total: tuple[int, int] | None,
        window: int | None,
        window_bounds: tuple[int, int] | None,
    ) -> None:
        n = len(can_gc)
        self.n = n
        edges: dict[tuple[int, int], int] = {}

        def bound(u: int, v: int, w: int) -> None:  # S_v - S_u <= w
            edges[u, v] = min(edges.get((u, v), w), w)

        for i in range(n):
            bound(i, i + 1, 1 if can_gc[i] else 0)
            bound(i + 1, i, 0 if can_at[i] else -1)
        if total is not None:
            bound(0, n, total[1])
            bound(n, 0, -total[0])
        if window is not None and window_bounds is not None:
            for s in range(n - window + 1):
                bound(s, s + window, window_bounds[1])
                bound(s + window, s, -window_bounds[0])
        self.dist, self.feasible = shortest_paths(n + 1, edges)
        self.reach = window if window is not None else 1

    def feasible_next(self, prefix_counts: np.ndarray, i: int) -> tuple[bool, bool]:
        """Whether base ``i`` (0-based) may be G/C and whether it may be A/T, given ``S_0..S_i`` in
        ``prefix_counts[: i + 1]`` (which met every bound so far).

        Only ``S_0`` and the last ``window`` counts can bind: every path of the constraint graph
        from an older node to ``i + 1`` passes through one of those (an edge spans at most a
        window, except the total's ``0 <-> n``), and a fixed node on a path dominates the nodes
        before it because the fixed counts are consistent.
        """
        a = max(1, i + 1 - self.reach)
        s = prefix_counts[a : i + 1]
        col, row = self.dist[a : i + 1, i + 1], self.dist[i + 1, a : i + 1]
        s0 = int(prefix_counts[0])
        hi = min(int((s + col).min()) if len(s) else _INF, s0 + int(self.dist[0, i + 1]))
        lo = max(int((s - row).max()) if len(s) else -_INF, s0 - int(self.dist[i + 1, 0]))
        v = int(prefix_counts[i])
        return lo <= v + 1 <= hi, lo <= v <= hi
