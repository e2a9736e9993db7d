"""Use a Carbon model served by vLLM, SGLang or hexamer's own server through the ``Carbon`` API.

    from hexamer import Carbon
    m = Carbon.from_server("http://host:8000", model="Carbon-3B", tokenizer="path/to/Carbon-3B")
    m.score(["ACGT..."], level="bp")

* :mod:`~hexamer.remote.backend`: :class:`RemoteBackend`, the :class:`~hexamer.backend.protocol.Backend`
  that ``Carbon.from_server`` runs on (the front end is ``Carbon`` itself);
* :mod:`~hexamer.remote.sampling`: generation, the client sampler (6-mers drawn here from the
  server's top N) and the server's own;
* :mod:`~hexamer.remote.embeddings`: ``Carbon.embed`` on hexamer's server (pooled there by the
  library's code, in requests split to its limits; vLLM and SGLang refused: their pooling differs);
* :mod:`~hexamer.remote.protocol`: request bodies, response parsers, backend detection;
* :mod:`~hexamer.remote.marginals`: top-N log-probabilities -> k-mer logits for :mod:`hexamer.fns`;
* :mod:`~hexamer.remote.http`: bounded concurrency, retries, timeouts, error messages.

Details and limits: ``docs/remote.md``.
"""

from hexamer.remote.backend import RemoteBackend
from hexamer.remote.errors import MalformedResponse, RemoteError, TopNWarning
from hexamer.remote.http import Connection
from hexamer.remote.marginals import Coverage, kmer_rows
from hexamer.remote.protocol import BACKENDS, ServerInfo, detect

__all__ = [
    "BACKENDS",
    "Connection",
    "Coverage",
    "MalformedResponse",
    "RemoteBackend",
    "RemoteError",
    "ServerInfo",
    "TopNWarning",
    "detect",
    "kmer_rows",
]
