"""Factorised Nucleotide Supervision (FNS) maths: base-level views of a k-mer distribution.

Pure torch; no model or tokenizer needed. k-mer indices are positions inside the DNA block
(token id minus the first k-mer id), in A,T,C,G product order with the first base most
significant; bases are numbered A=0, T=1, C=2, G=3 internally (``to_acgt`` reorders for display).

* :mod:`~hexamer.fns.tables`: digit tables and index <-> bases conversions;
* :mod:`~hexamer.fns.marginals`: block-softmax marginals, log-marginals, exact within-token
  conditionals;
* :mod:`~hexamer.fns.sampling`: base-pair and token-level choice of the next k-mer;
* :mod:`~hexamer.fns.scoring`: base-pair sequence scores;
* :mod:`~hexamer.fns.speculative`: speculative sampling's accept / resample step (token and bp level);
* :mod:`~hexamer.fns.loss`: the FNS training loss (corrected and reference-bug variants).
"""

from hexamer.fns.loss import FnsLoss, fns_loss
from hexamer.fns.marginals import (
    base_marginals,
    block_softmax,
    chain_log_prob,
    exact_log_conditionals,
    fns_log_prob,
    log_base_marginals,
    log_prefix_conditionals,
    token_log_prob,
)
from hexamer.fns.sampling import (
    bp_greedy,
    bp_sample,
    bp_sampling_probs,
    kmer_mask_from_positions,
    nucleus_mask,
    sample_from_probs,
    token_greedy,
    token_sample,
    token_sampling_probs,
    tokens_needed,
    trim_bases,
)
from hexamer.fns.scoring import BpScore, TokenScore, score_bases, score_tokens, targets_from_sequence
from hexamer.fns.speculative import (
    accept_draft,
    greedy_verify,
    product_distribution,
    product_prob,
    residual_distribution,
    verify_draft,
)
from hexamer.fns.tables import (
    BASES,
    bases_to_kmer,
    digits_of,
    from_acgt,
    kmer_digits,
    kmer_index,
    kmer_to_bases,
    n_kmers,
    onehot_map,
    to_acgt,
)

__all__ = [
    "BASES",
    "BpScore",
    "FnsLoss",
    "TokenScore",
    "accept_draft",
    "base_marginals",
    "bases_to_kmer",
    "block_softmax",
    "bp_greedy",
    "bp_sample",
    "bp_sampling_probs",
    "chain_log_prob",
    "digits_of",
    "exact_log_conditionals",
    "fns_log_prob",
    "fns_loss",
    "from_acgt",
    "greedy_verify",
    "kmer_digits",
    "kmer_index",
    "kmer_mask_from_positions",
    "kmer_to_bases",
    "log_base_marginals",
    "log_prefix_conditionals",
    "n_kmers",
    "nucleus_mask",
    "onehot_map",
    "product_distribution",
    "product_prob",
    "residual_distribution",
    "sample_from_probs",
    "score_bases",
    "score_tokens",
    "targets_from_sequence",
    "to_acgt",
    "token_greedy",
    "token_log_prob",
    "token_sample",
    "token_sampling_probs",
    "tokens_needed",
    "trim_bases",
    "verify_draft",
]
