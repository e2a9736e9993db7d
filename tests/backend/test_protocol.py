"""Every backend satisfies the Backend protocol and declares its capabilities."""

from __future__ import annotations

import pytest

from hexamer import Carbon
from hexamer.backend import (
    Backend,
    EmbeddingBackend,
    PrefixSharingBackend,
    ServedEmbeddingBackend,
    UnsupportedOperation,
)
from hexamer.embed import embed_sequences
from hexamer.remote import RemoteBackend
from tests.remote.fake_server import FakeSettings, make_app, serve


def test_remote_backend_declares_and_refuses_what_a_server_cannot_do(carbon: Carbon) -> None:
    with (
        serve(make_app(carbon, FakeSettings(owned_by="vllm"))) as url,
        Carbon.from_server(url, tokenizer=carbon.tokenizer, top_n=4608) as remote,
    ):
        assert isinstance(remote, Carbon)
        backend = remote.backend
        assert isinstance(backend, RemoteBackend) and isinstance(backend, Backend)
        assert backend.kind == "remote" and not backend.supports_kv_sharing
        assert not backend.supports_embeddings and not isinstance(backend, EmbeddingBackend)
        assert backend.server_kind == "vllm"
        assert backend.max_prompt_tokens == backend.context_length - 1
        with pytest.raises(UnsupportedOperation, match="not logits"):
            backend.kmer_logits([[1, 2]])
        # the operation is declared; a vLLM server's pooling is not hexamer's, so it refuses by name
        assert backend.supports_served_embeddings and isinstance(backend, ServedEmbeddingBackend)
        with pytest.raises(
            UnsupportedOperation, match=r"is a vllm server, whose /v1/embeddings pools its own way"
        ):
            embed_sequences(remote, ["ACGTAC"])
        seqs = ["ACGTACGGTACCATG", "TTGACATTGACA"]
        got = backend.window_log_likelihoods(seqs)
        want = carbon.backend.window_log_likelihoods(seqs)
        assert got == pytest.approx(want, abs=1e-4)
        (a,) = backend.next_base_log_marginals(["ACGTAC"])
        (b,) = carbon.backend.next_base_log_marginals(["ACGTAC"])
        assert a.tolist() == pytest.approx(b.tolist(), abs=1e-4)


def test_local_backend_is_prefix_sharing(carbon: Carbon) -> None:
    assert isinstance(carbon.backend, PrefixSharingBackend) and isinstance(carbon.backend, EmbeddingBackend)
    assert not carbon.backend.supports_served_embeddings  # it pools its own hidden states
