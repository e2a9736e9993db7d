"""Dinucleotide-preserving shuffle (Altschul & Erickson 1985): the null model for "knows real DNA".

A plain shuffle destroys base pairs, so any model that knows GC content and CpG depletion already
tells it apart from real DNA. A dinucleotide shuffle keeps the first and last base and every
dinucleotide count exactly (it is a random Eulerian walk through the sequence's own transition
multigraph, chosen as in Kandel et al. 1996: a random spanning arborescence of "last exits" towards
the final base, the other exits shuffled), so what separates real from shuffled is structure
beyond pairs of bases: k-mers, repeats, motifs.
"""

from __future__ import annotations

import itertools
import random

__all__ = ["dinucleotide_shuffle"]


def _last_edges(edges: dict[str, list[str]], last: str, rng: random.Random) -> dict[str, str]:
    """A random last exit for every base except ``last`` such that following them reaches
    ``last`` from everywhere (rejection sampling: at most 4 vertices for DNA, a few tries)."""
    while True:
        choice = {v: rng.choice(out) for v, out in edges.items() if v != last and out}
        ok = True
        for v in choice:
            seen, u = set(), v
            while u != last:
                if u in seen:
                    ok = False
                    break
                seen.add(u)
                u = choice[u]
            if not ok:
                break
        if ok:
            return choice


def dinucleotide_shuffle(seq: str, seed: int = 0) -> str:
    """``seq`` shuffled with its first base, last base and every dinucleotide count kept."""
    if len(seq) < 3:
        return seq
    rng = random.Random(seed)
    edges: dict[str, list[str]] = {}
    for a, b in itertools.pairwise(seq):
        edges.setdefault(a, []).append(b)
    last = seq[-1]
    final = _last_edges(edges, last, rng)
    for v, out in edges.items():
        if v in final:
            out.remove(final[v])
            rng.shuffle(out)
            out.append(final[v])
        else:
            rng.shuffle(out)
        out.reverse()  # pop() from the end takes the shuffled exits first, the last exit last
    walk = [seq[0]]
    for _ in range(len(seq) - 1):
        walk.append(edges[walk[-1]].pop())
    return "".join(walk)
