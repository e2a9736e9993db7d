"""Per-request generation options, validated once when a request is made.

Base masks are written the way biologists write motifs: one IUPAC code per generated base
(``N`` = any, ``A``/``C``/``G``/``T`` fixed, ``R`` = A or G, ``B`` = not A, ...), or as an
``(n, 4)`` boolean array with columns A, C, G, T.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from hexamer.engine.admission import ContextExceeded
from hexamer.validate import check_seed

# IUPAC nucleotide codes -> allowed bases
IUPAC: dict[str, str] = {
    "A": "A", "C": "C", "G": "G", "T": "T", "U": "T",
    "R": "AG", "Y": "CT", "S": "CG", "W": "AT", "K": "GT", "M": "AC",
    "B": "CGT", "D": "AGT", "H": "ACT", "V": "ACG", "N": "ACGT",
}  # fmt: skip
ACGT = "ACGT"
#: column j of an ATCG-ordered mask comes from column ACGT_TO_ATCG[j] of an ACGT-ordered one
ACGT_TO_ATCG = [0, 3, 1, 2]


def parse_base_mask(mask: str | np.ndarray) -> np.ndarray:
    """``(n, 4)`` bool array, columns in the vocabulary's A,T,C,G order, from IUPAC text or an
    ``(n, 4)`` A,C,G,T bool array. Positions that allow nothing are an error."""
    if isinstance(mask, str):
        rows = []
        for i, code in enumerate(mask.strip().upper()):
            allowed = IUPAC.get(code)
            if allowed is None:
                raise ValueError(
                    f"mask position {i + 1}: {code!r} is not an IUPAC nucleotide code (use A C G T N R Y S W K M B D H V)"
                )
            rows.append([b in allowed for b in ACGT])
        acgt = np.array(rows, dtype=bool).reshape(-1, 4)
    else:
        acgt = np.asarray(mask)
        if acgt.ndim != 2 or acgt.shape[1] != 4 or acgt.dtype != bool:
            raise ValueError(
                f"a mask array must be bool with shape (n, 4) (columns A, C, G, T), got {acgt.shape}"
            )
    empty = np.flatnonzero(~acgt.any(axis=1))
    if empty.size:
        raise ValueError(f"impossible mask: position {int(empty[0]) + 1} allows no base")
    return acgt[:, ACGT_TO_ATCG]


@dataclass(frozen=True)
class SamplingParams:
    """How one request is decoded.

    mode: ``"bp"`` samples each base from its FNS marginal (base-pair level); ``"token"`` samples
        whole 6-mers. temperature 0 means greedy. top_p applies per base in bp mode, per 6-mer in
        token mode.
    max_bp: new bases to return (exact: ``ceil`` of it in tokens are generated, the last trimmed).
    max_new_tokens: alternatively, a token budget (the output is ``6 * tokens`` bases).
    mask: IUPAC string or ``(n, 4)`` A,C,G,T bool array constraining the first n new bases.
    seed: seeds this request's own random generator, so its output never depends on other requests.
    stop_at_end_tag: token mode only: let the model emit ``</dna>`` and stop there.

    ``mode="text"`` samples over the whole vocabulary (text, tags, 6-mers, EOS), as an
    OpenAI-style completion server does; it takes ``max_new_tokens`` and the text-only options
    below, which the DNA modes refuse:

    ignore_eos: keep going past EOS. stop_token_ids: extra ids that end the request (kept in the
        output). min_tokens: EOS and stop ids are banned until this many tokens exist.
    top_k / min_p: the usual filters (0 = off). allowed_token_ids: sample only among these ids.
    logprobs: also record the sampled token's log-probability, rank and the top-N alternatives
        (raw model distribution, before temperature and filters). prompt_logprobs: the same for
        every prompt token (one forward over the prompt).

    The DNA modes take these too:

    top_k / min_p (token mode; also text mode): keep the k most likely 6-mers / those with at least
        min_p times the top probability, before top_p. bp mode refuses them (its filter is top_p per
        base). repetition_penalty (bp and token modes; 1 = off): the 6-mer logits of k-mers already
        in the prompt or the output are divided by it when positive, multiplied when negative (the
        ``transformers`` rule), before bp-level marginalisation. return_logprobs: record the
        raw-model log-probability of each chosen 6-mer (token mode: its log-softmax over the 6-mer
        block) or base (bp mode: its FNS marginal), before penalty, temperature and filters.
    """

    mode: Literal["bp", "token", "text"] = "bp"
    temperature: float = 1.0
    top_p: float = 1.0
    max_bp: int | None = None
    max_new_tokens: int | None = None
    mask: str | np.ndarray | None = field(default=None, compare=False)
    seed: int | None = None
    stop_at_end_tag: bool = False
    ignore_eos: bool = False
    stop_token_ids: tuple[int, ...] = ()
    min_tokens: int = 0
    top_k: int = 0
    min_p: float = 0.0
    logprobs: int | None = None
    prompt_logprobs: int | None = None
    allowed_token_ids: tuple[int, ...] | None = field(default=None, compare=False)
    repetition_penalty: float = 1.0
    return_logprobs: bool = False

    def __post_init__(self) -> None:
        if self.mode not in ("bp", "token", "text"):
            raise ValueError(f"mode must be 'bp', 'token' or 'text', got {self.mode!r}")
        self._check_dna_filters()
        self._check_text_options()
        if (
            not isinstance(self.temperature, int | float)
            or not math.isfinite(self.temperature)
            or self.temperature < 0
        ):
            raise ValueError(
                f"temperature must be a finite number >= 0 (0 = greedy), got {self.temperature!r}"
            )
        if not isinstance(self.top_p, int | float) or not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must lie in (0, 1], got {self.top_p!r}")
        if (self.max_bp is None) == (self.max_new_tokens is None):
            raise ValueError("give exactly one of max_bp and max_new_tokens")
        for name in ("max_bp", "max_new_tokens"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.seed is not None:
            check_seed(self.seed)
        if self.stop_at_end_tag and self.mode != "token":
            raise ValueError("stop_at_end_tag needs mode='token' (bp mode always emits bases)")
        if self.mask is not None:
            atcg = parse_base_mask(self.mask)
            limit = self.max_bp if self.max_bp is not None else 6 * int(self.max_new_tokens or 0)
            if len(atcg) > limit:
                raise ValueError(f"mask covers {len(atcg)} bases but only {limit} will be generated")
            object.__setattr__(self, "_mask_atcg", atcg)

    def _check_dna_filters(self) -> None:
        """top_k / min_p in token mode (text mode checks its own), repetition_penalty, return_logprobs."""
        penalty = self.repetition_penalty
        if (
            not isinstance(penalty, int | float)
            or isinstance(penalty, bool)
            or not (math.isfinite(penalty) and penalty > 0)
        ):
            raise ValueError(f"repetition_penalty must be a finite number > 0 (1 = off), got {penalty!r}")
        if penalty != 1 and self.mode == "text":
            raise ValueError("repetition_penalty applies to the DNA modes (bp, token)")
        if not isinstance(self.return_logprobs, bool):
            raise ValueError(f"return_logprobs must be True or False, got {self.return_logprobs!r}")
        if self.return_logprobs and self.mode == "text":
            raise ValueError("return_logprobs is for the DNA modes; mode='text' takes logprobs=N")
        if self.mode != "token":
            if self.mode == "bp" and (self.top_k != 0 or self.min_p != 0.0):
                raise ValueError(
                    "top_k and min_p filter whole 6-mers: use mode='token' (bp mode filters each base with top_p)"
                )
            return
        if not isinstance(self.top_k, int) or isinstance(self.top_k, bool) or self.top_k < 0:
            raise ValueError(f"top_k must be a non-negative integer (0 = off), got {self.top_k!r}")
        if (
            not isinstance(self.min_p, int | float)
            or isinstance(self.min_p, bool)
            or not 0 <= self.min_p <= 1
        ):
            raise ValueError(f"min_p must lie in [0, 1] (0 = off), got {self.min_p!r}")

    def _check_text_options(self) -> None:
        defaults = {
            "ignore_eos": False, "stop_token_ids": (), "min_tokens": 0,
            "logprobs": None, "prompt_logprobs": None, "allowed_token_ids": None,
        }  # fmt: skip
        if self.mode == "bp":
            defaults.update(top_k=0, min_p=0.0)  # token mode takes them (_check_dna_filters)
        if self.mode != "text":
            used = [name for name, value in defaults.items() if getattr(self, name) != value]
            if used:
                raise ValueError(f"{', '.join(used)} only apply to mode='text'")
            return
        if self.max_bp is not None or self.mask is not None or self.stop_at_end_tag:
            raise ValueError("mode='text' takes max_new_tokens (no max_bp, mask or stop_at_end_tag)")
        for name in ("min_tokens", "top_k"):
            value = getattr(self, name)
            if (
                not isinstance(value, int)
                or isinstance(value, bool)
                or value < (-1 if name == "top_k" else 0)
            ):
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
        if not isinstance(self.min_p, int | float) or not 0 <= self.min_p <= 1:
            raise ValueError(f"min_p must lie in [0, 1], got {self.min_p!r}")
        for name in ("logprobs", "prompt_logprobs"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
        object.__setattr__(self, "stop_token_ids", tuple(int(t) for t in self.stop_token_ids))
        if self.allowed_token_ids is not None:
            if not self.allowed_token_ids:
                raise ValueError("allowed_token_ids must not be empty")
            object.__setattr__(self, "allowed_token_ids", tuple(int(t) for t in self.allowed_token_ids))

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @property
    def mask_atcg(self) -> np.ndarray | None:
        """The mask as ``(n, 4)`` bool in A,T,C,G column order (vocabulary order)."""
        return getattr(self, "_mask_atcg", None)

    def new_tokens(self, n_forced: int = 0, k: int = 6) -> int:
        """Tokens a request with these options generates: ``ceil((n_forced + max_bp) / k)``, or
        ``max_new_tokens`` (``n_forced``: bases of a prompt's partial last k-mer, forced first)."""
        if self.max_bp is not None:
            return -(-(n_forced + self.max_bp) // k)
        return int(self.max_new_tokens or 0)

    def check_fits(
        self, prompt_tokens: int, n_forced: int, k: int, context: int, limit: str = "model's context"
    ) -> None:
        """The request must fit the model's context, checked before its per-base constraint table
        (``max_bp`` x 4 booleans) is allocated: ``ceil((n_forced + max_bp) / k)`` new tokens, or
        ``max_new_tokens``, plus the prompt; :class:`ContextExceeded` (a ``ValueError``) when not."""
        max_bp = self.max_bp
        n_tokens = self.new_tokens(n_forced, k)
        if prompt_tokens + n_tokens > context:
            new = f"{n_tokens} new tokens" + (f" ({max_bp} bp)" if max_bp is not None else "")
            room = max(0, context - prompt_tokens)
            raise ContextExceeded(
                prompt_tokens,
                n_tokens,
                context,
                limit,
                f"prompt of {prompt_tokens} tokens + {new} = {prompt_tokens + n_tokens} exceeds the {limit} "
                f"of {context} tokens (at most {max(0, room * k - n_forced)} new bp after this prompt)",
            )
