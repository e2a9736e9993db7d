"""Where the model runs, behind one protocol, and the one place model inputs are built.

* :mod:`~hexamer.backend.protocol`: :class:`Backend` (what the front end and every pipeline may
  ask of a model: scoring, generation of checked requests, ...) and :class:`PrefixSharingBackend`
  (the in-process extras); capabilities are declared attributes;
* :mod:`~hexamer.backend.local`: :class:`LocalBackend`, a model loaded in this process with its
  generation engine; the served one is :class:`hexamer.remote.backend.RemoteBackend`;
* :mod:`~hexamer.backend.inputs`: prompts and DNA sequences -> token ids (public, shared);
* :mod:`~hexamer.backend.results`: :class:`~hexamer.backend.results.Generation`,
  :class:`~hexamer.backend.results.ScoreResult`;
* :mod:`~hexamer.backend.generation`: generation options, prompt expansion and ``Generation``
  assembly, whatever the backend.

``Carbon`` (:mod:`hexamer.carbon`) is the one front end; ``carbon.backend`` is its backend. The
picklable recipes that open a ``Carbon`` in a worker process are :mod:`hexamer.opening`.
"""

from hexamer.backend.inputs import (
    DnaInputs,
    Prompt,
    dna_inputs,
    next_base_ids,
    parse_prompt,
    sequence_problem,
)
from hexamer.backend.local import LocalBackend
from hexamer.backend.protocol import (
    Backend,
    BackendKind,
    Decoding,
    EmbeddingBackend,
    Frontend,
    PrefixSharingBackend,
    ServedEmbeddingBackend,
    UnsupportedOperation,
)

__all__ = [
    "Backend",
    "BackendKind",
    "Decoding",
    "DnaInputs",
    "EmbeddingBackend",
    "Frontend",
    "LocalBackend",
    "PrefixSharingBackend",
    "Prompt",
    "ServedEmbeddingBackend",
    "UnsupportedOperation",
    "dna_inputs",
    "next_base_ids",
    "parse_prompt",
    "sequence_problem",
]
