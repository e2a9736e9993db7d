"""Exact FNS log-likelihood of every single edit of one sequence, on a model in this process.

An edit in 6-mer ``k`` leaves every token before ``k`` and its context unchanged, so the edited
sequence's base-level log-likelihood is

    LL(edit) = parent terms of tokens < k                      (summed once)
             + term of the new 6-mer under the parent's logits at k   (no forward)
             + terms of tokens > k                              (a forward from token k on)

The parent runs once (its keys and values, its per-token terms and, per token, the 4·k FNS masses
that price any new 6-mer there). Each edit then runs only its tail, the tokens from its edited 6-mer
on, on the parent's keys and values before it (:mod:`hexamer.design.optimise.tail_forward`): tails
of every edited 6-mer are packed, with no padding, into a few forwards of about ``token_budget``
tokens, so each projection and MLP product runs over thousands of rows at once and the Python cost
is paid per forward, not per 6-mer; layer 0's queries, keys and values of every tail token but the
edited one are the parent's and are not recomputed. Per scored position only what the FNS
likelihood needs is computed: a float32 softmax of the 6-mer logits summed into the 4·k base
marginals, of which the target's ``n_real`` are gathered (no float64 copy and softmax of the whole
block); the LM head runs in slices of positions that stay in cache.

:func:`one_forward_each` is the reference the benchmark and the tests compare with: the same model
and the same per-position arithmetic, one batch-1 forward per edited sequence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from hexamer.backend.local import LocalBackend
from hexamer.design.optimise.tail_forward import Group, TailRunner
from hexamer.fns import onehot_map
from hexamer.fns.likelihood import bp_log_likelihoods
from hexamer.tokenizer.dna import DnaEncoding, encode_dna
from hexamer.tokenizer.layout import BASES as KMER_BASES

__all__ = ["FnsTerms", "edit_log_likelihoods", "one_forward_each"]

#: positions whose 6-mer logits are reduced at once (a 4,096-wide float32 block each: ~2 MiB)
_SLICE = 128


class FnsTerms:
    """Per-position FNS terms ``sum_{j < n_real} log P_j(target base j)`` from normed hidden
    states, through the model's 6-mer rows of the LM head, in float32 with a float64 sum.

    ``P_j(b)`` is the mass of the 6-mers whose base ``j`` is ``b``. One float32 softmax over the
    block, then the 6-mers as a ``4**k1 x 4**k2`` grid (first and last bases): its row and column
    sums, each times a small one-hot map, give all ``4·k`` marginals (three times cheaper than one
    ``(4**k, 4·k)`` matmul). A target mass that underflows in float32 (> ~100 nats below the top
    6-mer) is recomputed in float64 by the library's :func:`~hexamer.fns.likelihood.bp_log_likelihoods`,
    so the result never differs from it beyond rounding (~1e-7 per base)."""

    def __init__(self, backend: LocalBackend) -> None:
        self.model = backend.model
        self.rows = (backend.layout.kmer_start, backend.layout.kmer_stop)
        k = self.k = backend.layout.k
        self.k1 = k // 2
        dev = backend.device
        self.maps = [
            onehot_map(n, torch.float32, dev).reshape(4**n, 4 * n) for n in (self.k1, k - self.k1) if n
        ]
        self.powers = 4 ** torch.arange(k - 1, -1, -1)

    def masses(self, hidden: torch.Tensor) -> torch.Tensor:
        """``(N, 4·k)`` float32 base marginals ``P_j(b)`` at ``N`` positions (column ``4j + b``)."""
        probs = torch.softmax(self.model.compute_logits(hidden, self.rows).float(), dim=-1)
        if len(self.maps) == 1:
            return probs @ self.maps[0]
        grid = probs.view(len(probs), 4**self.k1, 4 ** (self.k - self.k1))
        return torch.cat([grid.sum(-1) @ self.maps[0], grid.sum(1) @ self.maps[1]], dim=-1)

    def columns(self, targets: torch.Tensor) -> torch.Tensor:
        """``(N, k)`` mass columns of the targets' bases (``targets``: 6-mer indices in the block)."""
        digits = (targets[:, None] // self.powers) % 4
        return digits + 4 * torch.arange(self.k)

    def from_masses(self, mass: torch.Tensor, targets: torch.Tensor, n_real: torch.Tensor) -> torch.Tensor:
        """``(N,)`` float64 terms of ``targets`` under precomputed masses (``-inf`` where one underflowed)."""
        picked = mass.gather(1, self.columns(targets).to(mass.device)).double().log()
        keep = (torch.arange(self.k) < n_real[:, None]).to(mass.device)
        return torch.where(keep, picked, 0.0).sum(-1).cpu()

    def terms(self, hidden: torch.Tensor, targets: torch.Tensor, n_real: torch.Tensor) -> torch.Tensor:
        """``(N,)`` float64 terms of ``N`` positions (``hidden``: ``(N, H)`` normed states)."""
        out = torch.empty(len(targets), dtype=torch.float64)
        for s in range(0, len(targets), _SLICE):
            cut = slice(s, s + _SLICE)
            out[cut] = self.from_masses(self.masses(hidden[cut]), targets[cut], n_real[cut])
        bad = torch.nonzero(~torch.isfinite(out)).flatten()
        if bad.numel():  # a target mass underflowed in float32: the float64 recipe for those
            logits = self.model.compute_logits(hidden[bad.to(hidden.device)], self.rows)
            tgt, real = targets[bad].numpy(), n_real[bad].numpy()
            out[bad] = torch.tensor(
                bp_log_likelihoods(logits, tgt, real, [1] * len(tgt)), dtype=torch.float64
            )
        return out


@dataclass(frozen=True)
class _Parent:
    ids: np.ndarray  # (T,) token ids
    targets: torch.Tensor  # (T,) 6-mer indices in the block
    n_real: torch.Tensor  # (T,) real bases per token
    runner: TailRunner  # the parent's keys and values, for its edited copies' tails
    mass: torch.Tensor  # (T, 4k) FNS marginals at each position
    before: np.ndarray  # (T,) float64 sum of the terms of tokens < t


@torch.inference_mode()
def _run_parent(backend: LocalBackend, fns: FnsTerms, parent: str) -> _Parent:
    lay = backend.layout
    enc = encode_dna(parent, lay)
    runner = TailRunner(backend.model, torch.tensor([lay.begin_id, *enc.ids[:-1].tolist()]))
    hidden = runner.parent()
    targets, n_real = _targets(enc, lay.kmer_start)
    mass = torch.cat([fns.masses(hidden[s : s + _SLICE]) for s in range(0, len(hidden), _SLICE)])
    terms = fns.from_masses(mass, targets, n_real)
    if not bool(torch.isfinite(terms).all()):  # an underflow: the checked path
        terms = fns.terms(hidden, targets, n_real)
    terms = terms.numpy()
    before = np.concatenate([[0.0], np.cumsum(terms)[:-1]])
    return _Parent(enc.ids, targets, n_real, runner, mass, before)


def _new_targets(parent: _Parent, k: int, edits: Sequence[tuple[int, str]]) -> torch.Tensor:
    """The edited 6-mer of each edit, as an index in the block (one digit of the parent's replaced)."""
    pos = np.array([p for p, _ in edits], dtype=np.int64)
    digit = np.array([KMER_BASES.index(b) for _, b in edits], dtype=np.int64)
    token, j = pos // k, pos % k
    old = parent.targets.numpy()[token]
    place = 4 ** (k - 1 - j)
    return torch.from_numpy(old - ((old // place) % 4) * place + digit * place)


def _chunks(
    rows: list[tuple[int, int, int]], t_all: int, batch_size: int, token_budget: int
) -> list[list[list[tuple[int, int, int]]]]:
    """Rows (sorted by edited token) in packed forwards of at most ``batch_size`` rows and about
    ``token_budget`` tail tokens (a tail longer than the budget runs alone), each forward a list
    of groups of rows with the same edited token."""
    chunks: list[list[list[tuple[int, int, int]]]] = [[]]
    rows_in, tokens_in = 0, 0
    for row in rows:
        width = t_all - 1 - row[1]
        if chunks[-1] and (rows_in + 1 > batch_size or tokens_in + width > token_budget):
            chunks.append([])
            rows_in, tokens_in = 0, 0
        groups = chunks[-1]
        if groups and groups[-1][0][1] == row[1]:
            groups[-1].append(row)
        else:
            groups.append([row])
        rows_in, tokens_in = rows_in + 1, tokens_in + width
    return [c for c in chunks if c]


@torch.inference_mode()
def _tails(
    backend: LocalBackend,
    fns: FnsTerms,
    parent: _Parent,
    rows: list[tuple[int, int, int]],
    *,
    batch_size: int,
    token_budget: int,
) -> dict[int, float]:
    """Per ``(edit index, token k, new 6-mer index)`` row (sorted by ``k``), the sum of the terms
    of the tokens after its edited one."""
    t_all, start = len(parent.ids), backend.layout.kmer_start
    out: dict[int, float] = {}
    for chunk in _chunks(rows, t_all, batch_size, token_budget):
        groups = [Group(g[0][1] + 1, torch.tensor([start + new for _, _, new in g])) for g in chunk]
        hidden = parent.runner.tails(groups)
        flat = [r for g in chunk for r in g]
        widths = torch.tensor([t_all - 1 - k for _, k, _ in flat])
        tok = torch.cat([torch.arange(t_all - w, t_all) for w in widths.tolist()])  # predicted tokens
        terms = fns.terms(hidden, parent.targets[tok], parent.n_real[tok])
        row_of = torch.arange(len(flat)).repeat_interleave(widths)
        sums = torch.zeros(len(flat), dtype=torch.float64).index_add_(0, row_of, terms)
        for (i, _, _), s in zip(flat, sums.tolist(), strict=True):
            out[i] = s
    return out


@torch.inference_mode()
def edit_log_likelihoods(
    backend: LocalBackend,
    parent: str,
    edits: Sequence[tuple[int, str]],
    *,
    batch_size: int = 4096,
    token_budget: int = 2048,
) -> np.ndarray:
    """``(len(edits),)`` float64 summed FNS log-likelihood of ``parent`` (A/C/G/T) with each single
    substitution ``(pos, base)`` applied, exactly as its own forward would give it. The tails
    run packed, at most ``batch_size`` edits and about ``token_budget`` tail tokens per forward."""
    if not parent or set(parent) - set("ACGT"):
        raise ValueError("the parent must be non-empty A/C/G/T text")
    bad_edits = [(p, b) for p, b in edits if not (0 <= p < len(parent) and b in ("A", "C", "G", "T"))]
    if bad_edits:
        raise ValueError(f"edits {bad_edits[:3]} are not (0-based position in the parent, A/C/G/T)")
    if not edits:
        return np.empty(0, dtype=np.float64)
    k = backend.layout.k
    fns = FnsTerms(backend)
    par = _run_parent(backend, fns, parent)
    new = _new_targets(par, k, edits)
    token = torch.tensor([p // k for p, _ in edits], dtype=torch.int64)
    own = fns.from_masses(par.mass[token], new, par.n_real[token]).numpy()
    bad = torch.from_numpy(~np.isfinite(own))
    if bool(bad.any()):  # the edited 6-mer's mass underflowed at its position: recompute those exactly
        hidden_rows = _hidden(backend, encode_dna(parent, backend.layout))[token[bad]]
        own[bad.numpy()] = fns.terms(hidden_rows, new[bad], par.n_real[token[bad]]).numpy()
    total = par.before[token.numpy()] + own
    t_all = len(par.ids)
    rows = sorted(
        ((i, int(t), int(new[i])) for i, t in enumerate(token.tolist()) if t < t_all - 1),
        key=lambda r: r[1],
    )  # stable: edits of one 6-mer stay together, in input order
    tails = _tails(backend, fns, par, rows, batch_size=batch_size, token_budget=token_budget)
    for i, s in tails.items():
        total[i] += s
    return total


def _targets(enc: DnaEncoding, kmer_start: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per token: the target's index in the 6-mer block (0 where not real) and its real bases."""
    n_real = enc.n_real.astype(np.int64)
    targets = np.where(n_real > 0, enc.ids.astype(np.int64) - kmer_start, 0)
    return torch.from_numpy(targets), torch.from_numpy(n_real)


@torch.inference_mode()
def _hidden(backend: LocalBackend, enc: DnaEncoding) -> torch.Tensor:
    """``(T, H)`` normed hidden states of one sequence's forward (position t predicts token t)."""
    lay = backend.layout
    ids = torch.tensor([[lay.begin_id, *enc.ids[:-1].tolist()]], device=backend.device)
    hidden = backend.model(ids, logits_at="none", return_hidden=True).hidden
    assert hidden is not None
    return hidden[0]


@torch.inference_mode()
def one_forward_each(backend: LocalBackend, sequences: Sequence[str]) -> np.ndarray:
    """``(n,)`` float64 summed FNS log-likelihood of each sequence by its own batch-1 forward (the
    reference: the same model and per-position arithmetic as :func:`edit_log_likelihoods`, no
    sharing and no batching)."""
    lay = backend.layout
    fns = FnsTerms(backend)
    out = np.empty(len(sequences), dtype=np.float64)
    for i, seq in enumerate(sequences):
        enc = encode_dna(seq, lay)
        out[i] = float(fns.terms(_hidden(backend, enc), *_targets(enc, lay.kmer_start)).sum())
    return out
