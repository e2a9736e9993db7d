"""CarbonTokenizer behaviour beyond single-string ids: batches, padding, masks, offsets, decode."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from hexamer.tokenizer import CarbonTokenizer, UntaggedDnaWarning


def test_batch_right_padding_matches_official_call(real_tok: CarbonTokenizer) -> None:
    texts = ["<dna>ATCGATCG</dna>", "hello", "<dna>A"]
    out = real_tok(texts, padding=True, return_tensors="pt", return_token_mask=True)
    ids = [real_tok.encode(t) for t in texts]
    width = max(map(len, ids))
    expected = [row + [151643] * (width - len(row)) for row in ids]
    assert out["input_ids"].tolist() == expected
    assert out["input_ids"].dtype == torch.int64
    assert out["attention_mask"].tolist() == [[1] * len(r) + [0] * (width - len(r)) for r in ids]
    assert out["token_mask"].tolist()[0] == [0, 6, 2, 0]
    assert out["token_mask"].tolist()[1][-1] == -2
    assert out.input_ids is out["input_ids"]


def test_left_padding_gives_identical_ids_per_row(tok: CarbonTokenizer) -> None:
    texts = ["<dna>ATCGATCGAATTTTTTGGGGGGCCCCCC", "hi <dna>AC"]
    right = tok(texts, padding=True, return_tensors="np")
    left = tok(texts, padding=True, padding_side="left", return_tensors="np")
    for r in range(2):
        keep_r = right["attention_mask"][r].astype(bool)
        keep_l = left["attention_mask"][r].astype(bool)
        assert (
            right["input_ids"][r][keep_r].tolist()
            == left["input_ids"][r][keep_l].tolist()
            == tok.encode(texts[r])
        )
    shorter = int(np.argmin([len(tok.encode(t)) for t in texts]))
    assert left["attention_mask"][shorter][0] == 0 and right["attention_mask"][shorter][-1] == 0


def test_max_length_padding_and_truncation(tok: CarbonTokenizer) -> None:
    out = tok(["<dna>ACGTACGTACGT"], padding="max_length", max_length=6)
    assert len(out["input_ids"][0]) == 6
    cut = tok("<dna>ACGTACGTACGTACGT</dna>", truncation=True, max_length=2)
    assert cut["input_ids"] == tok.encode("<dna>ACGTACGTACGTACGT</dna>")[:2]
    with pytest.raises(ValueError, match="max_length"):
        tok(["x"], padding="max_length")
    with pytest.raises(ValueError, match="padding=True"):
        tok(["x", "<dna>ACGTACGTACGT"], return_tensors="pt")
    with pytest.raises(ValueError, match="padding_side"):
        tok("x", padding_side="middle")  # type: ignore[arg-type]


def test_single_string_call(tok: CarbonTokenizer) -> None:
    out = tok("<dna>ACGT")
    assert out["input_ids"] == tok.encode("<dna>ACGT")
    pt = tok("<dna>ACGT", return_tensors="pt")
    assert tuple(pt["input_ids"].shape) == (1, 2)
    # add_special_tokens never adds BOS/EOS
    assert tok("<dna>ACGT", add_special_tokens=True)["input_ids"] == tok.encode("<dna>ACGT")


def test_offsets_and_dna_spans(tok: CarbonTokenizer) -> None:
    text = "hi <dna> ACGTACGTA \n</dna>!"
    enc = tok.encode_plus(text)
    assert len(enc.offsets) == len(enc.ids) == len(enc.token_mask)
    (span,) = enc.dna_spans
    assert text[span.char_start : span.char_end] == "ACGTACGTA"
    assert span.n_bases == 9 and span.pad_bases == 3 and span.n_tokens == 2
    assert span.base_to_token(0) == (span.token_start, 0)
    assert span.base_to_token(8) == (span.token_start + 1, 2)
    assert span.token_to_bases(span.token_start + 1) == (6, 9)
    with pytest.raises(IndexError):
        span.base_to_token(9)
    first, second = enc.offsets[span.token_start], enc.offsets[span.token_start + 1]
    assert text[first[0] : first[1]] == "ACGTAC" and text[second[0] : second[1]] == "GTA"
    tag = enc.offsets[span.token_start - 1]
    assert text[tag[0] : tag[1]] == "<dna>"
    assert enc.token_mask[span.token_start : span.token_stop] == [6, 3]


def test_auto_tag_offsets_refer_to_the_callers_text(tok: CarbonTokenizer) -> None:
    enc = tok.encode_plus("ACGTNNACGT", auto_dna_tags=True)
    assert enc.dna_spans[0].char_start == 0 and enc.dna_spans[0].char_end == 10
    assert enc.offsets[1] == (0, 6)
    assert enc.n_oov == 1


def test_decode_rules(real_tok: CarbonTokenizer) -> None:
    t = real_tok
    ids = t.encode("hi <dna>ATCGATCGA</dna>!<|endoftext|>")
    assert t.decode(ids) == "hi <dna>ATCGATCGAAAA</dna>!<|endoftext|>"
    assert t.decode(ids, skip_special_tokens=True) == "hi ATCGATCGAAAA!"
    # k-mers outside a region decode to bases; tags outside a region are dropped only with skip
    assert t.decode([152105, 151670]) == "ATCGAT</dna>"
    assert t.decode([152105, 151670], skip_special_tokens=True) == "ATCGAT"
    # BPE ids inside a region are dropped; <oov> and unused pads give their names
    assert t.decode([151669, 14990, 151671, 152105, 155768, 151670]) == "<dna><oov>ATCGAT<unused_0></dna>"
    assert t.decode([151669, 152105]) == "<dna>ATCGAT"
    assert t.decode(torch.tensor([151669, 152105])) == "<dna>ATCGAT"
    assert t.decode(np.array([[151669, 152105]])) == "<dna>ATCGAT"
    assert t.batch_decode([[14990], [152105]]) == ["hello", "ATCGAT"]


def test_decode_errors(tok: CarbonTokenizer) -> None:
    with pytest.raises(ValueError, match=r"token id 999999 at position 1 is out of range"):
        tok.decode([1, 999_999])
    with pytest.raises(ValueError, match="out of range"):
        tok.decode([-1])
    with pytest.raises(ValueError, match="batch_decode"):
        tok.decode(np.zeros((2, 3), dtype=np.int64))
    with pytest.raises(ValueError, match="integers"):
        tok.decode(np.array([1.5]))
    with pytest.raises(ValueError, match="out of range"):
        tok.id_to_token(len(tok))


def test_decode_dna_for_generated_ids(tok: CarbonTokenizer) -> None:
    ids = tok.encode_dna("ACGTACGTAC")
    assert tok.decode_dna(ids) == "ACGTACGTACAA"
    assert tok.decode_dna(ids, n_bases=10) == "ACGTACGTAC"
    assert tok.decode_dna(tok.encode("<dna>ACGTACNNNNNN</dna>")) == "ACGTACNNNNNN"


def test_encode_dna_fast_path_equals_encode(real_tok: CarbonTokenizer) -> None:
    rng = np.random.default_rng(3)
    for n in (0, 1, 5, 6, 7, 1000):
        seq = "".join(rng.choice(list("ACGTN"), n))
        assert real_tok.encode_dna(seq).tolist() == real_tok.encode(f"<dna>{seq}</dna>")
        assert real_tok.encode_dna(seq, tags=False).tolist() == real_tok.encode(f"<dna>{seq}</dna>")[1:-1]
    assert real_tok.encode_dna("  ACGTAC\n").tolist() == [151669, real_tok.layout.kmer_id("ACGTAC"), 151670]


def test_untagged_dna_warns_once(tok: CarbonTokenizer) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tok.encode("ACGT" * 10 + " and " + "TTGA" * 10)
        tok.encode("<dna>" + "ACGT" * 10 + "</dna> plain text ACGT")
    assert [w.category for w in caught] == [UntaggedDnaWarning]


def test_vocabulary_views(tok: CarbonTokenizer) -> None:
    assert tok.token_to_id("<dna>") == tok.dna_begin_id
    assert tok.token_to_id("ACGTAC") == tok.layout.kmer_id("ACGTAC")
    assert tok.token_to_id("<unused_0>") == tok.layout.kmer_stop
    assert tok.token_to_id("<unused_999>") is None
    assert tok.token_to_id("no-such-token") is None
    assert tok.convert_ids_to_tokens(tok.encode("<dna>ACGTAC</dna>")) == ["<dna>", "ACGTAC", "</dna>"]
    vocab = tok.get_vocab()
    assert len(vocab) == len(tok)  # the tiny BPE has no CCCCCC entry
    assert all(tok.id_to_token(i) == s for s, i in list(vocab.items())[:50])


def test_encode_rejects_non_strings(tok: CarbonTokenizer) -> None:
    with pytest.raises(TypeError, match="input 1 is a int"):
        tok.encode_batch(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="list of strings"):
        tok.encode_batch("abc")


def test_save_and_reload(tok: CarbonTokenizer, tmp_path) -> None:
    tok.save_pretrained(tmp_path)
    again = CarbonTokenizer.from_pretrained(tmp_path)
    texts = ["hello <dna>ACGTACGTT</dna>", "<fungi_species><dna>GGG"]
    assert [again.encode(t) for t in texts] == [tok.encode(t) for t in texts]
    assert (again.eos_token_id, again.pad_token_id, len(again)) == (
        tok.eos_token_id,
        tok.pad_token_id,
        len(tok),
    )
