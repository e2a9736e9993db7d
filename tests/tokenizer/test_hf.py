"""The transformers adapter gives the same ids as CarbonTokenizer and works with HF models."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")

from hexamer.tokenizer import CarbonTokenizer  # noqa: E402
from hexamer.tokenizer.hf import HexamerHFTokenizer, to_transformers  # noqa: E402

TEXTS = [
    "hello <dna>ACGTACGTAC</dna>!",
    "<mammalian_species><dna>CCCCCCAAAT",
    "",
    "ACGT</dna>tail",
    "<dna>ACGTNNACGT</dna><|endoftext|>",
]


@pytest.fixture(scope="module")
def hf(tiny_folder: Path) -> HexamerHFTokenizer:
    return HexamerHFTokenizer.from_pretrained(tiny_folder, trust_remote_code=True)


def test_ids_match(hf: HexamerHFTokenizer, tok: CarbonTokenizer) -> None:
    for text in TEXTS:
        assert hf.encode(text) == tok.encode(text)
        assert hf(text)["input_ids"] == tok.encode(text)
        assert hf.encode(text, add_special_tokens=True) == tok.encode(text)


def test_batch_padding_matches(hf: HexamerHFTokenizer, tok: CarbonTokenizer) -> None:
    ours = tok(TEXTS, padding=True, return_tensors="pt")
    theirs = hf(TEXTS, padding=True, return_tensors="pt")
    assert torch.equal(ours["input_ids"], theirs["input_ids"])
    assert torch.equal(ours["attention_mask"], theirs["attention_mask"])
    left = hf(TEXTS, padding=True, padding_side="left", return_tensors="pt")
    ours_left = tok(TEXTS, padding=True, padding_side="left", return_tensors="pt")
    assert torch.equal(left["input_ids"], ours_left["input_ids"])


def test_decode_and_tokens(hf: HexamerHFTokenizer, tok: CarbonTokenizer) -> None:
    for text in TEXTS:
        ids = tok.encode(text)
        assert hf.decode(ids) == tok.decode(ids)
        assert hf.decode(ids, skip_special_tokens=True) == tok.decode(ids, skip_special_tokens=True)
    assert hf.convert_ids_to_tokens(tok.encode("<dna>ACGTAC")) == ["<dna>", "ACGTAC"]
    assert hf.tokenize("<dna>ACGTAC") == ["<dna>", "ACGTAC"]
    assert hf.convert_tokens_to_ids(["<dna>", "ACGTAC"]) == tok.encode("<dna>ACGTAC")
    assert len(hf) == hf.vocab_size == len(tok)
    assert hf.eos_token_id == hf.pad_token_id == tok.eos_token_id


def test_real_vocab_adapter(real_tok: CarbonTokenizer) -> None:
    hf = to_transformers(real_tok)
    assert hf.encode("hi <dna>ATCGAT</dna>!") == [6023, 220, 151669, 152105, 151670, 0]
    assert hf.encode("<dna>CCCCCC") == [151669, 154402]
    assert hf.get_vocab()["CCCCCC"] == 91443


def test_generate_and_pipeline(hf: HexamerHFTokenizer, tiny_folder: Path) -> None:
    model = transformers.LlamaForCausalLM.from_pretrained(tiny_folder)
    batch = hf(["<dna>ACGTACGTACGT", "<dna>TTTTTT"], padding=True, padding_side="left", return_tensors="pt")
    out = model.generate(**batch, max_new_tokens=3, do_sample=False, pad_token_id=hf.pad_token_id)
    assert out.shape == (2, batch["input_ids"].shape[1] + 3)
    texts = hf.batch_decode(out, skip_special_tokens=True)
    assert texts[0].startswith("ACGTACGTACGT")
    pipe = transformers.pipeline("text-generation", model=model, tokenizer=hf)
    result = pipe("<dna>ACGTACGTACGT", max_new_tokens=2, do_sample=False)
    assert result[0]["generated_text"].startswith("<dna>ACGTACGTACGT")


def test_save_round_trip(hf: HexamerHFTokenizer, tok: CarbonTokenizer, tmp_path: Path) -> None:
    files = hf.save_pretrained(tmp_path)
    assert any(f.endswith("dna_config.json") for f in files)
    again = HexamerHFTokenizer.from_pretrained(tmp_path)
    assert [again.encode(t) for t in TEXTS] == [tok.encode(t) for t in TEXTS]
