"""What the DNA endpoints share: tags and prefixes follow the library's rule (a 400 naming the
field), so no DNA or control token reaches the model through them."""

from __future__ import annotations

import httpx
import pytest

from hexamer import Carbon


@pytest.mark.parametrize(
    ("path", "extra", "field"),
    [
        ("/v1/dna/generate", {"tags": ["x><dna>GG</dna"]}, "tags"),
        ("/v1/dna/generate", {"tags": ["dna"]}, "tags"),
        ("/v1/dna/generate", {"prefix": "</dna><|endoftext|>"}, "prefix"),
        ("/v1/dna/generate", {"prefix": "<dna>"}, "prefix"),
        ("/v1/dna/score", {"tags": ["a b"]}, "tags"),
        ("/v1/dna/score", {"prefix": "<x><dna>GG"}, "prefix"),
        ("/v1/embeddings", {"prefix": "<|endoftext|>"}, "prefix"),
    ],
)
def test_tags_and_prefixes_carrying_tokens_are_a_400_naming_the_field(
    url: str, path: str, extra: dict, field: str
) -> None:
    body = {
        "/v1/dna/generate": {"prompt": "ACGTAC", "max_bp": 6},
        "/v1/dna/score": {"sequences": "ACGTAC"},
        "/v1/embeddings": {"input": "ACGTAC"},
    }[path]
    r = httpx.post(f"{url}{path}", json={**body, **extra}, timeout=60)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == field and error["message"].startswith(f"{field}: "), error


def test_tag_names_are_written_as_tags(url: str, ref: Carbon) -> None:
    body = {"prompt": "ACGTAC", "max_bp": 12, "temperature": 0, "tags": ["mammalian_species", "<gene_type>"]}
    r = httpx.post(f"{url}/v1/dna/generate", json=body, timeout=60)
    assert r.status_code == 200, r.text
    want = ref.generate("ACGTAC", max_bp=12, temperature=0, prefix="<mammalian_species><gene_type>")
    assert r.json()["choices"][0]["sequence"] == want.sequence
    assert r.json()["usage"]["prompt_tokens"] == len(
        ref.parse_prompt("<mammalian_species><gene_type><dna>ACGTAC").ids
    )
