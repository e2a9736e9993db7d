"""Where the model runs, behind one protocol, and the one place model inputs are built.

* :mod:`~hexamer.backend.protocol`: :class:`Backend` (what every pipeline may ask of a model) and
  :class:`PrefixSharingBackend` (the in-process extras); capabilities are declared attributes;
* :mod:`~hexamer.backend.local`: :class:`LocalBackend`, a model loaded in this process;
  the served one is :class:`hexamer.remote.backend.RemoteBackend`;
* :mod:`~hexamer.backend.inputs`: prompts and DNA sequences -> token ids (public, shared);
* :mod:`~hexamer.backend.results`: :class:`~hexamer.backend.results.Generation`,
  :class:`~hexamer.backend.results.ScoreResult`;
* :mod:`~hexamer.backend.generation`: generation options shared by local and served front ends;
* :mod:`~hexamer.backend.spec`: :class:`LocalSpec` / :class:`RemoteSpec`, picklable recipes that
  ``open()`` a front end in a worker process.

``Carbon`` (:mod:`hexamer.carbon`) is the front end; ``carbon.backend`` is its backend.
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
    EmbeddingBackend,
    PrefixSharingBackend,
    UnsupportedOperation,
)
from hexamer.backend.spec import LocalSpec, ModelSpec, RemoteSpec

__all__ = [
    "Backend",
    "BackendKind",
    "DnaInputs",
    "EmbeddingBackend",
    "LocalBackend",
    "LocalSpec",
    "ModelSpec",
    "PrefixSharingBackend",
    "Prompt",
    "RemoteSpec",
    "UnsupportedOperation",
    "dna_inputs",
    "next_base_ids",
    "parse_prompt",
    "sequence_problem",
]
