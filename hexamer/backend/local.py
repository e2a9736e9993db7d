""":class:`LocalBackend`: the :class:`~hexamer.backend.protocol.Backend` operations on a model loaded
in this process (CPU or GPU): scoring, hidden states, generation on its own
:class:`~hexamer.engine.Engine` (speculative decoding included), and the shared-prefix scorers
only an in-process model allows (``supports_kv_sharing``)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Literal

import numpy as np
import torch

from hexamer.backend.inputs import Prompt, TokenizedInputs, next_base_ids
from hexamer.backend.protocol import Backend, Decoding, OnDone, OnProgress, UnsupportedOperation
from hexamer.backend.results import ScoreResult, bp_score_result, checked_base_logprobs
from hexamer.backend.score_options import ScoreOptions
from hexamer.engine import Engine, EngineConfig, Request, SamplingParams
from hexamer.engine.batching import padded_chunks
from hexamer.engine.spec_config import SpecConfig, SpecStats
from hexamer.engine.speculative import check_compatible
from hexamer.fns import log_base_marginals, log_prefix_conditionals, score_bases, score_tokens, to_acgt
from hexamer.fns.likelihood import bp_log_likelihood, bp_log_likelihoods
from hexamer.model import KVCache, LlamaModel, pad_rows
from hexamer.tokenizer import CarbonTokenizer
from hexamer.tokenizer.dna import DnaEncoding, encode_dna, encode_kmers, oov_bases
from hexamer.validate import check_new_length

__all__ = ["LocalBackend", "length_batches"]


def length_batches(lengths: Sequence[int], token_budget: int) -> list[list[int]]:
    """Indices grouped by ascending length so that each group's padded size stays within
    ``token_budget`` (one over-long item still gets a group of its own)."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        if current and (len(current) + 1) * lengths[i] > token_budget:
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


class LocalBackend(TokenizedInputs):
    """The model and tokenizer of this process, as a :class:`~hexamer.backend.protocol.Backend`
    and :class:`~hexamer.backend.protocol.PrefixSharingBackend`; it owns the generation
    :class:`~hexamer.engine.Engine` (built with ``engine_config``)."""

    kind: Literal["local"] = "local"
    supports_kv_sharing = True
    supports_embeddings = True
    supports_served_embeddings = False

    def __init__(
        self, model: LlamaModel, tokenizer: CarbonTokenizer, engine_config: EngineConfig | None = None
    ) -> None:
        if model.config.vocab_size != len(tokenizer):
            raise ValueError(
                f"model vocab_size {model.config.vocab_size} != tokenizer vocabulary {len(tokenizer)}"
            )
        self.model = model
        self.tokenizer = tokenizer
        self.layout = tokenizer.layout
        self.rows = (self.layout.kmer_start, self.layout.kmer_stop)
        #: the engine's options, passed whole to every engine built from this backend's
        self.engine_config = engine_config if engine_config is not None else EngineConfig()
        self.engine = Engine(model, self.layout, self.engine_config)

    def __repr__(self) -> str:
        return f"LocalBackend(device={self.device}, context={self.context_length})"

    def close(self) -> None:
        """Nothing to release: the model lives as long as the backend."""

    # ---------------------------------------------------------------- declared facts
    @property
    def context_length(self) -> int:
        return self.model.config.max_position_embeddings

    @property
    def max_prompt_tokens(self) -> int:
        return self.context_length

    @property
    def device(self) -> torch.device:
        return self.model.device

    @property
    def hidden_size(self) -> int:
        return self.model.config.hidden_size

    @property
    def num_layers(self) -> int:
        return self.model.config.num_hidden_layers

    @property
    def pad_id(self) -> int:
        return self.tokenizer.pad_token_id or 0

    def fingerprint(self) -> str:
        """A short hash of the model's configuration and a few of its weights (not of the folder path)."""
        h = hashlib.sha256(repr(self.model.config).encode())
        params = list(self.model.named_parameters())
        for name, param in params[:: max(1, len(params) // 8)]:
            h.update(name.encode())
            h.update(param.detach().reshape(-1)[:64].float().cpu().numpy().tobytes())
        return h.hexdigest()[:16]

    # ---------------------------------------------------------------- forwards
    @torch.inference_mode()
    def kmer_logits(self, rows: Sequence[Sequence[int]]) -> torch.Tensor:
        """(B, T, 4**k) fp32 k-mer logits for right-padded token rows (one forward, no cache)."""
        batch = pad_rows([list(r) for r in rows], self.pad_id)
        out = self.model(
            batch.ids_on(self.device),
            attention_mask=batch.mask_on(self.device),
            logits_at="all",
            vocab_rows=self.rows,
        )
        return out.logits

    @torch.inference_mode()
    def hidden_states(self, rows: Sequence[Sequence[int]], layer: int) -> torch.Tensor:
        batch = pad_rows([list(r) for r in rows], self.pad_id)
        final = layer == self.num_layers
        out = self.model(
            batch.ids_on(self.device),
            attention_mask=batch.mask_on(self.device),
            logits_at="none",
            return_hidden=final,
            return_layer_hidden=not final,
        )
        hidden = out.hidden if final else out.layer_hidden[layer]  # type: ignore[index]
        assert hidden is not None
        return hidden.float()

    def window_log_likelihoods(self, sequences: Sequence[str]) -> list[float]:
        """One full forward per sequence (the obvious way; :meth:`shared_prefix_log_likelihoods`
        is the fast one)."""
        out = []
        for seq in sequences:
            ids, start, targets, n_real, _ = self.dna_inputs(seq, "", 0, validate=False)
            logits = self.kmer_logits([ids])[0, start - 1 : start - 1 + len(targets)]
            out.append(bp_log_likelihood(logits, targets, n_real))
        return out

    @torch.inference_mode()
    def next_base_log_marginals(self, contexts: Sequence[str]) -> list[torch.Tensor]:
        out = []
        for context in contexts:
            x = torch.tensor([next_base_ids(self.layout, context)], device=self.device)
            logits = self.model(x, logits_at="last", vocab_rows=self.rows).logits
            assert logits is not None
            out.append(log_base_marginals(logits[0].double())[0].cpu())
        return out

    # ---------------------------------------------------------------- Carbon.score / base_logprobs
    def score(
        self, sequences: Sequence[str], options: ScoreOptions, *, on_progress: OnProgress = None
    ) -> list[ScoreResult]:
        inputs = [self.dna_inputs(s, options.prefix, i) for i, s in enumerate(sequences)]
        results: list[ScoreResult | None] = [None] * len(inputs)
        k, level, method = self.layout.k, options.level, options.method
        for group in length_batches([len(x.ids) for x in inputs], options.token_budget):
            logits = self.kmer_logits([inputs[i].ids for i in group])
            for row, i in enumerate(group):
                _, start, targets, n_real, content = inputs[i]
                n = len(targets)
                pred = logits[row, start - 1 : start - 1 + n]
                tgt = torch.from_numpy(np.where(n_real > 0, targets, 0))
                real = torch.from_numpy(n_real)
                n_oov = oov_bases(n_real, len(content), k)
                if level == "bp":
                    s = score_bases(pred, tgt, real, method=method)
                    results[i] = bp_score_result(s, len(content), n_oov)
                else:
                    full = real == k
                    t = score_tokens(pred, tgt, valid=full)
                    per_token = np.where(full.numpy(), t.per_token.cpu().numpy(), np.nan).astype(np.float32)
                    results[i] = ScoreResult(
                        mean=float(t.mean), n_scored=int(full.sum()), n_oov_bases=n_oov, per_token=per_token
                    )
            if on_progress is not None:
                on_progress(len(group))
        return [r for r in results if r is not None]

    def base_logprobs(
        self, sequence: str, *, method: Literal["fns", "exact"] = "fns", prefix: str = ""
    ) -> np.ndarray:
        ids, start, targets, n_real, content = self.dna_inputs(sequence, prefix, 0)
        logits = self.kmer_logits([ids])[0, start - 1 : start - 1 + len(targets)]
        if method == "fns":
            lp = log_base_marginals(logits)
        elif method == "exact":
            tgt = torch.from_numpy(np.where(n_real > 0, targets, 0))
            lp = log_prefix_conditionals(logits, tgt)
            lp = torch.where(torch.from_numpy(n_real > 0)[:, None, None], lp, torch.nan)
        else:
            raise ValueError(f"method must be 'fns' or 'exact', got {method!r}")
        out = to_acgt(lp).reshape(-1, 4)[: len(content)].cpu().numpy().astype(np.float32)
        return checked_base_logprobs(out, n_real, self.layout.k)

    # ---------------------------------------------------------------- generation
    def check_generation_length(self, max_bp: object, max_new_tokens: object) -> None:
        """More new tokens than the context (or ``max_model_len``), or a KV cache for them larger
        than the budget or the free memory, are refused naming the option."""
        limit = self.engine.max_len
        where = "model's context" if limit == self.context_length else "max_model_len"
        n_new = check_new_length(max_bp, max_new_tokens, self.layout.k, limit, where)
        if n_new is not None:
            name, value = ("max_bp", max_bp) if max_bp is not None else ("max_new_tokens", max_new_tokens)
            self.engine.cache.check_row(n_new, f"{name}={value:,}")

    def make_request(self, prompt: Prompt, params: SamplingParams) -> Request:
        params.check_fits(len(prompt.ids), len(prompt.forced), self.layout.k, self.engine.max_len)
        req = Request(prompt.ids, params, forced=prompt.forced, k=self.layout.k)
        if params.repetition_penalty != 1:
            start, stop = self.layout.kmer_start, self.layout.kmer_stop
            req.prompt_kmers = tuple(i - start for i in prompt.ids if start <= i < stop)
        self.engine.check(req)
        return req

    def check_decoding(self, requests: Sequence[Request], decoding: Decoding) -> None:
        """The engine samples here: ``sampler="server"`` is refused; a draft must be in-process
        too and share this model's tokenizer."""
        if decoding.sampler == "server":
            raise UnsupportedOperation(
                "sampler='server' is a served model's own sampler; this model runs in this process "
                "(leave sampler='auto')"
            )
        if decoding.draft is not None:
            check_compatible(self, self._draft(decoding.draft))

    def generate(
        self, requests: Sequence[Request], decoding: Decoding, *, on_done: OnDone = None
    ) -> SpecStats | None:
        """All requests on the engine at once (continuous batching); with a draft, speculatively
        (the draft attached to this engine, every request drafting ``num_speculative`` 6-mers)."""
        self.check_decoding(requests, decoding)

        def step(done: list[Request]) -> None:
            if on_done is not None and done:
                on_done(done)

        if decoding.draft is None:
            self.engine.run(requests, on_step=step)
            return None
        config = SpecConfig.from_option(decoding.num_speculative)
        for r in requests:
            r.speculative = config
        self.engine.attach_draft(self._draft(decoding.draft).model)
        runner = self.engine.draft
        assert runner is not None
        runner.stats = SpecStats()
        self.engine.run(requests, on_step=step)
        return runner.stats

    @staticmethod
    def _draft(draft: Backend) -> LocalBackend:
        if not isinstance(draft, LocalBackend):
            raise UnsupportedOperation(
                f"a draft model runs in this process next to the target; got a {draft.kind} backend "
                "(load the draft with Carbon.from_pretrained)"
            )
        return draft

    # ---------------------------------------------------------------- shared-prefix scorers
    @torch.inference_mode()
    def shared_prefix_log_likelihoods(
        self, groups: Sequence[Sequence[str]], *, batch_size: int, token_budget: int
    ) -> list[list[float]]:
        """For each group of DNA strings, the float64 sum of per-base FNS log-probabilities of each
        string *after* the tokens all strings of the group share.

        The shared tokens are run once per group (their per-base terms are equal in every string and
        left out); the KV cache of that prefix is copied to one row per string and the suffixes run
        in forwards of at most ``batch_size`` rows and ``token_budget`` padded tokens.
        """
        lay = self.layout
        encs = [[encode_dna(x, lay) for x in g] for g in groups]
        shared: list[int] = []
        for g in encs:
            n = min(len(e.ids) for e in g)
            t0 = n
            for e in g[1:]:
                diff = np.flatnonzero((e.ids[:n] != g[0].ids[:n]) | (e.n_real[:n] != g[0].n_real[:n]))
                if diff.size:
                    t0 = min(t0, int(diff[0]))
            shared.append(t0)
        after = {(gi, si): len(e.ids) - shared[gi] for gi, g in enumerate(encs) for si, e in enumerate(g)}
        p_max = max(1 + t for t in shared)
        result: list[list[float]] = [[0.0] * len(g) for g in encs]  # no token after the prefix: 0
        # every group led by one string (the single edits of one parent): that string runs once,
        # each group's prefix is its KV cache cut at the group's shared length, and its own tail
        # terms come from that forward
        parent = len(groups) > 1 and all(len(g) > 1 and g[0] == groups[0][0] for g in groups)
        if parent:
            cache, first, terms = self._parent_forward(encs[0][0], shared)
            for gi in range(len(groups)):
                result[gi][0] = float(terms[shared[gi] :].sum())
        else:
            cache = KVCache.for_model(self.model, len(groups), p_max)
            prefixes = [(gi, [lay.begin_id, *g[0].ids[: shared[gi]].tolist()]) for gi, g in enumerate(encs)]
            first = torch.stack(self._prefill(cache, prefixes))  # (G, 4**k): predicts token shared[g]

        def bp_sum(gi: int, si: int, pred: torch.Tensor) -> None:
            e = encs[gi][si]
            ids, n_real = e.ids[shared[gi] :], e.n_real[shared[gi] :]
            result[gi][si] = bp_log_likelihood(pred, ids - lay.kmer_start, n_real)

        for (gi, si), m in after.items():
            if m == 1 and not (parent and si == 0):  # one token after the prefix: its logits are `first`
                bp_sum(gi, si, first[gi : gi + 1])
        # strings with at least two tokens after the prefix run their tail (all but the last token)
        suffix = [key for key, m in after.items() if m >= 2 and not (parent and key[1] == 0)]
        for chunk in padded_chunks(
            suffix, [after[key] - 1 for key in suffix], token_budget=token_budget, max_rows=batch_size
        ):
            s_max = max(after[key] - 1 for key in chunk)
            if parent:
                rows_cache = cache.fork([0] * len(chunk), max(cache.max_len, p_max + s_max))
                rows_cache.truncate(range(len(chunk)), [1 + shared[gi] for gi, _ in chunk])
            else:
                rows_cache = cache.fork([gi for gi, _ in chunk], p_max + s_max)
            batch = pad_rows([encs[gi][si].ids[shared[gi] : -1].tolist() for gi, si in chunk], self.pad_id)
            logits = self.model(
                batch.ids_on(self.device),
                kv_cache=rows_cache,
                attention_mask=batch.mask_on(self.device),
                logits_at="all",
                vocab_rows=self.rows,
            ).logits
            assert logits is not None
            for r, (gi, si) in enumerate(chunk):  # row by row: each row's float64 block stays in cache
                bp_sum(gi, si, torch.cat([first[gi : gi + 1], logits[r, : after[gi, si] - 1]]))
        return result

    def _parent_forward(
        self, enc: DnaEncoding, shared: list[int]
    ) -> tuple[KVCache, torch.Tensor, np.ndarray]:
        """One forward of a whole string (all tokens but its last): its KV cache (one row), the
        logits predicting token ``shared[g]`` for each group ``g``, and its per-token FNS terms."""
        lay = self.layout
        ids = [lay.begin_id, *enc.ids[:-1].tolist()]
        cache = KVCache.for_model(self.model, 1, len(ids))
        logits = self.model(
            torch.tensor([ids], device=self.device), kv_cache=cache, logits_at="all", vocab_rows=self.rows
        ).logits
        assert logits is not None
        n = len(enc.ids)
        terms = bp_log_likelihoods(logits[0], enc.ids - lay.kmer_start, enc.n_real, [1] * n)
        first = logits[0, torch.tensor([min(t, n - 1) for t in shared], device=self.device)]
        return cache, first, np.asarray(terms, dtype=np.float64)

    @torch.inference_mode()
    def next_base_log_marginals_at(self, sequence: str, offsets: Sequence[int]) -> list[torch.Tensor]:
        """Every offset's context is a prefix of ``sequence[:max(offsets)]``, so one causal forward
        holds them all: the hidden state just before offset j sees exactly that context. The logits
        are computed at those positions only. (Prefilling a ``KVCache`` with the first context and
        feeding the gaps offset by offset gives the same numbers and the same token count, but
        every step then attends through an explicit mask and batched steps are padded to the
        longest gap: it measured 2-3x slower on CPU.)"""
        lay = self.layout
        last = max(offsets)
        ids = torch.tensor([[lay.begin_id, *encode_kmers(sequence[:last], lay).tolist()]], device=self.device)
        hidden = self.model(ids, logits_at="none", return_hidden=True).hidden
        assert hidden is not None
        at = torch.tensor([p // lay.k for p in offsets], device=self.device)
        logits = self.model.compute_logits(hidden[0, at], self.rows)
        return list(log_base_marginals(logits.double())[:, 0].cpu())

    def _prefill(self, cache: KVCache, rows: list[tuple[int, list[int]]]) -> list[torch.Tensor]:
        """Fill empty cache rows; rows of equal length share a forward (no padding, so attention
        takes its plain causal path). Returns each row's last-position logits, in ``rows`` order."""
        by_len: dict[int, list[int]] = {}
        for i, (_, ids) in enumerate(rows):
            by_len.setdefault(len(ids), []).append(i)
        out: list[torch.Tensor | None] = [None] * len(rows)
        for members in by_len.values():
            logits = self._batch_forward(cache, [rows[i] for i in members])
            for i, row in zip(members, logits, strict=True):
                out[i] = row
        return [x for x in out if x is not None]

    def _batch_forward(self, cache: KVCache, rows: list[tuple[int, list[int]]]) -> torch.Tensor:
        """Append each ``(cache row, ids)`` to its row (right-padded); ``(B, 4**k)`` last-token logits."""
        batch = pad_rows([seq for _, seq in rows], self.pad_id)
        last = torch.tensor([len(seq) - 1 for _, seq in rows])
        cache_rows = [gi for gi, _ in rows]
        logits = self.model(
            batch.ids_on(self.device),
            kv_cache=cache,
            attention_mask=batch.mask_on(self.device),
            cache_rows=None if cache_rows == list(range(cache.batch_size)) else cache_rows,
            logits_at=last.to(self.device),
            vocab_rows=self.rows,
        ).logits
        assert logits is not None
        return logits
