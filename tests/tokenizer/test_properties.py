"""Property-based tests: random mixes of text and DNA against a plain restatement of the rules."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hexamer.tokenizer import CarbonTokenizer
from tests.tokenizer.reference import reference_encode

DNA_CHARS = "ACGTacgtNn"
PIECES = st.one_of(
    st.text(alphabet=st.characters(codec="utf-8", exclude_characters="<>"), max_size=12),
    st.text(alphabet=DNA_CHARS + " \n", max_size=20),
    st.sampled_from(
        ["<dna>", "</dna>", "<dna", "dna>", "<", ">", "<oov>", "<|endoftext|>", "<mammalian_species>"]
    ),
)
SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@SETTINGS
@given(st.lists(PIECES, max_size=8), st.booleans())
def test_random_mixes_match_reference(tok: CarbonTokenizer, pieces: list[str], auto: bool) -> None:
    text = "".join(pieces)
    expected = reference_encode(text, tok._bpe, tok.layout.dna_start_id, auto_dna_tags=auto)
    assert tok.encode(text, auto_dna_tags=auto) == expected


@SETTINGS
@given(st.text(alphabet="ACGT", max_size=200))
def test_clean_dna_round_trip(tok: CarbonTokenizer, seq: str) -> None:
    ids = tok.encode(f"<dna>{seq}</dna>")
    assert len(ids) == 2 + -(-len(seq) // 6)
    pad = (-len(seq)) % 6
    assert tok.decode(ids) == f"<dna>{seq}{'A' * pad}</dna>"
    assert tok.decode_dna(ids, n_bases=len(seq)) == seq
    assert sum(m for m in tok.encode_plus(f"<dna>{seq}</dna>").token_mask if m > 0) == len(seq)


@SETTINGS
@given(st.text(alphabet=st.characters(codec="utf-8", exclude_characters="<>"), max_size=40))
def test_random_text_round_trip(tok: CarbonTokenizer, text: str) -> None:
    assert tok.decode(tok.encode(text)) == __import__("unicodedata").normalize("NFC", text)


@SETTINGS
@given(
    st.text(alphabet=st.characters(codec="utf-8", exclude_characters="<>"), max_size=15),
    st.text(alphabet=DNA_CHARS, max_size=30),
    st.text(alphabet=st.characters(codec="utf-8", exclude_characters="<>"), max_size=15),
)
def test_segments_encode_independently(tok: CarbonTokenizer, before: str, dna: str, after: str) -> None:
    whole = tok.encode(f"{before}<dna>{dna}</dna>{after}")
    parts = tok.encode(before) + tok.encode_dna(dna).tolist() + tok.encode(after)
    assert whole == parts


@SETTINGS
@given(st.lists(st.text(alphabet="ACGTN", max_size=40), min_size=1, max_size=6))
def test_batch_equals_single(tok: CarbonTokenizer, seqs: list[str]) -> None:
    texts = [f"<dna>{s}" for s in seqs]
    batch = tok(texts, padding=True, padding_side="left", return_tensors="np")
    for row, text in enumerate(texts):
        keep = batch["attention_mask"][row].astype(bool)
        assert batch["input_ids"][row][keep].tolist() == tok.encode(text)
