"""Embeddings through a server: the same tokens as locally, requests within the server's limits,
one result per sequence in order, failures reported as a local model reports them, and servers
whose pooling is not hexamer's refused by name."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Coroutine, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hexamer import Carbon
from hexamer.backend import UnsupportedOperation
from hexamer.backend.embedding_options import EmbeddingOptions
from hexamer.embed import embed_sequences
from hexamer.io import normalize_sequence
from hexamer.model.finite import NonFiniteOutputError, non_finite_output
from hexamer.remote import MalformedResponse, RemoteError
from hexamer.remote.embeddings import request_batches, served_embeddings, served_text
from hexamer.remote.protocol import HexamerFacts
from hexamer.server.testing import serve_in_thread
from hexamer.tokenizer.dna import encode_dna
from tests.remote.fake_server import FakeSettings, make_app, serve

FACTS = HexamerFacts(hidden_size=4, num_layers=2, max_prompts=3, max_bp=50, max_body_bytes=4096 + 40)


@pytest.mark.parametrize(
    "text", ["ACGTACGGT", "acgtRYKMNNacg", "ACGT?XACGTAC", "ACGßTACGGTAAé", "AC-GT.ACGTA"]
)
def test_sent_text_tokenises_to_the_same_ids(local: Carbon, text: str) -> None:
    seq = normalize_sequence(text)
    sent = served_text(seq)
    assert set(sent) <= set("ACGTNacgt")  # what the server accepts
    want, got = encode_dna(seq, local.layout), encode_dna(sent, local.layout)
    assert got.ids.tolist() == want.ids.tolist() and got.n_real.tolist() == want.n_real.tolist()


def test_requests_keep_within_the_server_limits() -> None:
    # batch_size 2 (below max_prompts 3): two per request; 51 bases exceed max_bp (50): in none
    lengths = [10, 10, 10, 51, 5, 30, 30]
    assert request_batches(lengths, FACTS, batch_size=2) == [[0, 1], [2, 4], [5], [6]]
    # 40 bytes of body room, 3 of them around each sequence: 13 * 3 fit, 8 + 33 do not
    assert request_batches(lengths, FACTS, batch_size=100) == [[0, 1, 2], [4], [5], [6]]


class _Server:
    """A stand-in connection: vectors ``[i, i, i, i]`` for a sequence of ``i`` bases; a request that
    holds a sequence starting with ``T`` answers HTTP 500 with a non-finite output's message."""

    def __init__(self, answer: Any = None) -> None:
        self.requests: list[list[str]] = []
        self.answer = answer

    def url(self, path: str) -> str:
        return f"http://stand-in{path}"

    async def post(self, path: str, body: dict[str, Any]) -> Any:
        texts = body["input"]
        self.requests.append(texts)
        if any(t.startswith("T") for t in texts):
            message = f"POST {self.url(path)} returned HTTP 500: input[0]: {non_finite_output('embedding')}"
            raise RemoteError(message, url=self.url(path), status=500)
        if self.answer is not None:
            return self.answer
        vectors = [np.full(FACTS.hidden_size, len(t), dtype="<f4") for t in texts]
        return {
            "data": [
                {"index": i, "embedding": base64.b64encode(v.tobytes()).decode()}
                for i, v in enumerate(vectors)
            ]
        }

    def run_all(self, coros: Iterable[Coroutine[Any, Any, Any]]) -> list[Any]:
        async def everything() -> list[Any]:
            return list(await asyncio.gather(*coros))

        return asyncio.run(everything())


def test_every_sequence_gets_one_result_in_order() -> None:
    server = _Server()
    seqs = ["ACGTAC", "T" + "A" * 9, "GGG", "A" * 60, "CCCC", "TT"]
    out = served_embeddings(server, "m", FACTS, seqs, EmbeddingOptions(batch_size=3))  # type: ignore[arg-type]
    assert [r.tolist() if isinstance(r, np.ndarray) else r for r in out] == [
        [6.0] * 4,
        non_finite_output("embedding"),  # what a local model gives: Carbon.embed raises NonFiniteOutputError
        [3.0] * 4,
        "60 bases exceed the server's limit of 50 per sequence (hexamer serve --max-bp)",
        [4.0] * 4,
        non_finite_output("embedding"),
    ]
    # the failed requests were sent again one sequence at a time; the long sequence never went
    assert server.requests[:2] == [["ACGTAC", "TAAAAAAAAA", "GGG"], ["CCCC", "TT"]]
    assert sorted(map(tuple, server.requests[2:])) == [
        ("ACGTAC",),
        ("CCCC",),
        ("GGG",),
        ("TAAAAAAAAA",),
        ("TT",),
    ]


@pytest.mark.parametrize(
    "answer",
    [
        {"data": []},
        {"data": [{"index": 0, "embedding": "AAAA"}]},
        {"data": [{"index": 5, "embedding": ""}]},
        [],
    ],
)
def test_a_malformed_answer_fails_the_call(answer: Any) -> None:
    with pytest.raises(MalformedResponse, match="malformed response"):
        served_embeddings(_Server(answer), "m", FACTS, ["ACGT"], EmbeddingOptions())  # type: ignore[arg-type]


@pytest.mark.parametrize("owned_by", ["sglang", "vllm"])
def test_a_server_that_pools_its_own_way_is_refused(local: Carbon, owned_by: str) -> None:
    with (
        serve(make_app(local, FakeSettings(owned_by=owned_by))) as url,
        Carbon.from_server(url, tokenizer=local.tokenizer) as remote,
        pytest.raises(
            UnsupportedOperation,
            match=rf"^{url} is a {owned_by} server, whose /v1/embeddings pools its own way",
        ),
    ):
        remote.embed("ACGTAC")


def test_a_hexamer_server_without_its_facts_is_refused(local: Carbon) -> None:
    with (
        serve(make_app(local, FakeSettings(owned_by="hexamer"))) as url,
        Carbon.from_server(url, tokenizer=local.tokenizer) as remote,
        pytest.raises(UnsupportedOperation, match="does not give its model's layers and limits"),
    ):
        remote.embed("ACGTAC")


def test_failed_records_are_reported_as_locally(overflow_folder: Path) -> None:
    """A model whose outputs are NaN: each sequence fails with a local model's reason (and
    ``Carbon.embed`` raises ``NonFiniteOutputError``); one longer than the server's ``max_bp`` is
    not sent and says so; every record is answered, in order."""
    records = [("a", "ACGTAC"), ("b", "A" * 61), ("c", ""), ("d", "GGTACC"), ("e", "TTTTTT")]
    local = Carbon.from_pretrained(overflow_folder)
    said: list[str] = []
    errors: list[dict[str, str]] = [{}, {}]
    with (
        serve_in_thread(overflow_folder, max_model_len=256, max_bp=60, max_prompts=2) as url,
        Carbon.from_server(url) as remote,
    ):
        for carbon, seen in zip((local, remote), errors, strict=True):
            with pytest.raises(NonFiniteOutputError, match=r"^sequence 0: non-finite embedding") as caught:
                carbon.embed("ACGTACGT")
            said.append(str(caught.value))
            out = list(embed_sequences(carbon, records, batch_size=8, on_error=seen.__setitem__))
            assert [(ident, vector) for ident, vector in out] == [(r[0], None) for r in records]
    assert said[0] == said[1]
    here, there = errors
    assert there.pop("b") == "61 bases exceed the server's limit of 60 per sequence (hexamer serve --max-bp)"
    assert here.pop("b") == non_finite_output("embedding")  # a local model has no such limit
    assert (
        here
        == there
        == {
            "a": non_finite_output("embedding"),
            "c": "empty sequence",
            "d": non_finite_output("embedding"),
            "e": non_finite_output("embedding"),
        }
    )
