"""Training data: splits, windows, and the labels/masks the trainer's loss is computed on.

The loss checks are brute force from the raw text: walk the sequence in 6-base chunks, skip chunks
holding a non-ACGT base, and sum -log P_j(base) with P_j from explicit sums over the vocabulary.
That exercises the label construction (tags, <oov>, padding) and the alignment end to end.
"""

from __future__ import annotations

import gzip
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from hexamer.io import reverse_complement
from hexamer.model import load_model
from hexamer.tokenizer import CarbonTokenizer
from hexamer.train.data import (
    IGNORE_INDEX,
    WindowSampler,
    build_example,
    collate,
    load_corpus,
    step_rng,
    validation_windows,
)
from hexamer.train.objective import base_accuracy, batch_loss, supervised_logits
from tests.train.helpers import write_fasta

TAG = "<mammalian_species>"
SEQ = "ACGTACGGATCCNNTTAGCAGTCAAGTGCATTGACGA"  # 37 bases: chunk 2 holds N, the tail has 1 base


@pytest.fixture(scope="module")
def model(tiny_folder: Path):  # type: ignore[no-untyped-def]
    m, _ = load_model(tiny_folder)
    return m


def _chunks(seq: str) -> list[tuple[int, str]]:
    return [(c, seq[6 * c : 6 * c + 6]) for c in range(math.ceil(len(seq) / 6))]


def _brute_force(model, tok: CarbonTokenizer, seq: str, tag: str) -> tuple[float, float, int]:  # type: ignore[no-untyped-def]
    """(mean FNS NLL per real base, mean token CE per full 6-mer, bases) from raw text and full logits."""
    layout = tok.layout
    tag_len = len(tok.encode(tag)) if tag else 0
    ids = tok.encode(f"{tag}<dna>{seq}</dna>")
    with torch.no_grad():
        logits = model(torch.tensor([ids]), logits_at="all").logits[0].double()
    probs = torch.softmax(logits, dim=-1)
    letters = np.array([list(km) for km in layout.kmers])  # (4096, 6) bases of every k-mer row
    nll = ce = 0.0
    n_bases = n_full = 0
    for c, chunk in _chunks(seq):
        if set(chunk) - set("ACGT"):
            continue  # <oov>: no base to supervise
        target = chunk.ljust(6, "A")
        row = probs[tag_len + c]  # the output at <dna> predicts chunk 0
        for j, base in enumerate(chunk):  # real bases only: the A padding is not DNA
            block = row[layout.kmer_start : layout.kmer_start + layout.n_kmers]
            mass = float(block[torch.from_numpy(letters[:, j] == base)].sum())
            nll -= math.log(mass / float(row.sum()))
            n_bases += 1
        if len(chunk) == 6:
            ce -= math.log(float(row[layout.kmer_id(target)]))
            n_full += 1
    return nll / n_bases, ce / n_full, n_bases


def test_labels_mask_tags_oov_and_padding(tok: CarbonTokenizer) -> None:
    layout = tok.layout
    ex = build_example(tok, SEQ, TAG)
    tag_ids = tok.encode(TAG)
    full = tok.encode(f"{TAG}<dna>{SEQ}</dna>")
    assert ex.input_ids.tolist() == full[:-1]  # </dna> is a label only
    assert len(ex.labels) == len(ex.input_ids) == len(ex.valid_len)
    supervised = [i for i, lab in enumerate(ex.labels.tolist()) if lab != IGNORE_INDEX]
    # chunk c is predicted at input position len(tag) + c; chunk 2 (with N) is <oov>: unsupervised
    n_chunks = math.ceil(len(SEQ) / 6)
    assert supervised == [len(tag_ids) + c for c in range(n_chunks) if c != 2]
    assert full[len(tag_ids) + 1 + 2] == layout.oov_id
    # tags and </dna> never supervised; the tail token supervises its one real base
    assert ex.valid_len.tolist()[: len(tag_ids)] == [0] * len(tag_ids)
    assert ex.valid_len[supervised].tolist() == [6, 6, 6, 6, 6, 1]
    assert ex.valid_len.sum() == len(SEQ) - 6
    assert all(layout.is_kmer(int(x)) for x in ex.labels[supervised])


def test_trainer_fns_loss_matches_brute_force(model, tok: CarbonTokenizer) -> None:  # type: ignore[no-untyped-def]
    seqs = [(SEQ, TAG), ("TTGACAGGCTAGCTAGGATTACAGATTACA", ""), ("GATTACANNNNNNACGTTG", TAG)]
    batch = collate([build_example(tok, s, t) for s, t in seqs], pad_id=tok.pad_token_id)
    assert batch.input_ids.shape[0] == 3
    parts = batch_loss(
        model, batch, kmer_start=tok.layout.kmer_start, fns_weight=1.0, token_norm=1, base_norm=batch.n_bases
    )
    expected = [_brute_force(model, tok, s, t) for s, t in seqs]
    total_bases = sum(e[2] for e in expected)
    assert batch.n_bases == parts.n_bases == total_bases
    want = sum(e[0] * e[2] for e in expected) / total_bases
    assert float(parts.loss) == pytest.approx(want, rel=1e-5)


def test_trainer_ce_loss_matches_brute_force(model, tok: CarbonTokenizer) -> None:  # type: ignore[no-untyped-def]
    seq = "TTGACAGGCTAGCTAGGATTACAGATTACAGT"  # 5 full 6-mers + a 2-base tail (not a CE target)
    batch = collate([build_example(tok, seq, TAG)], pad_id=tok.pad_token_id)
    parts = batch_loss(
        model,
        batch,
        kmer_start=tok.layout.kmer_start,
        fns_weight=0.0,
        token_norm=batch.n_full_tokens,
        base_norm=1,
    )
    _, ce, _ = _brute_force(model, tok, seq, TAG)
    assert batch.n_full_tokens == 5
    assert float(parts.loss) == pytest.approx(ce, rel=1e-5)


def test_padding_rows_do_not_change_the_loss(model, tok: CarbonTokenizer) -> None:  # type: ignore[no-untyped-def]
    short = build_example(tok, "ACGTAC", "")
    long = build_example(tok, "ACGTACGTTGCA" * 4, TAG)
    alone = collate([short], tok.pad_token_id)
    padded = collate([short, long], tok.pad_token_id)
    assert padded.input_ids.shape[1] > alone.input_ids.shape[1]
    la, _, _ = supervised_logits(model, alone)
    lp, _, _ = supervised_logits(model, padded)
    torch.testing.assert_close(la, lp[: la.shape[0]], rtol=1e-5, atol=1e-5)


def test_base_accuracy_counts_real_bases(tok: CarbonTokenizer) -> None:
    layout = tok.layout
    logits = torch.full((2, len(tok)), -20.0)
    logits[0, layout.kmer_id("ACGTAC")] = 10.0
    logits[1, layout.kmer_id("GGGGGG")] = 10.0
    labels = torch.tensor([layout.kmer_id("ACGTAC"), layout.kmer_id("GAAAAA")])
    valid = torch.tensor([6, 1])  # the second is a tail with one real base, G
    right, total, _ = base_accuracy(logits, labels, valid, kmer_start=layout.kmer_start)
    assert total.tolist() == [2, 1, 1, 1, 1, 1]
    assert right.tolist() == [2, 1, 1, 1, 1, 1]


# ---------------------------------------------------------------------------------------------
# corpus, windows


def test_corpus_holds_out_the_end_of_each_sequence(tmp_path: Path) -> None:
    f = write_fasta(tmp_path / "a.fa", {"x": "ACGT" * 25, "y": "acgtn" * 40})
    corpus = load_corpus([str(f)], val_fraction=0.2, tag="<t>")
    assert [s.bases for s in corpus.train] == ["ACGT" * 20, ("ACGTN" * 40)[:160]]
    assert [s.bases for s in corpus.val] == ["ACGT" * 5, ("ACGTN" * 40)[160:]]
    assert {s.tag for s in corpus.train + corpus.val} == {"<t>"}
    assert corpus.train_bp == 240 and corpus.val_bp == 60


def test_corpus_reads_gzip_and_val_files(tmp_path: Path) -> None:
    gz = tmp_path / "a.fa.gz"
    with gzip.open(gz, "wt") as fh:
        fh.write(">a\nACGTACGTAC\n")
    val = write_fasta(tmp_path / "v.fa", {"v": "TTTT"})
    corpus = load_corpus([str(gz)], val_data=[str(val)], val_fraction=0.0, file_tags={str(val): "<v>"})
    assert [s.bases for s in corpus.train] == ["ACGTACGTAC"]
    assert [(s.bases, s.tag) for s in corpus.val] == [("TTTT", "<v>")]


def test_empty_and_bad_files_raise(tmp_path: Path) -> None:
    empty = tmp_path / "empty.fa"
    empty.write_text("")
    with pytest.raises(ValueError, match="empty"):
        load_corpus([str(empty)])
    with pytest.raises(FileNotFoundError, match="not found"):
        load_corpus([str(tmp_path / "missing.fa")])
    bad = tmp_path / "bad.fa"
    bad.write_text(">a\nACGT\n>a\nACGT\n")
    with pytest.raises(ValueError, match="duplicate id"):
        load_corpus([str(bad)])
    with pytest.raises(ValueError, match="no training data"):
        load_corpus([])


def test_window_sampler(tmp_path: Path) -> None:
    f = write_fasta(tmp_path / "a.fa", {"long": "AAAAACCCCG" * 40, "short": "ACGT"})
    corpus = load_corpus([str(f)], val_fraction=0.0)
    sampler = WindowSampler(corpus.train, 60, rc_prob=0.5)
    assert sampler.skipped == ["short"]
    a = sampler.sample(step_rng(3, 7), 16)
    b = sampler.sample(step_rng(3, 7), 16)
    assert a == b  # a batch is a function of (seed, step)
    assert a != sampler.sample(step_rng(3, 8), 16)
    src = corpus.train[0].bases
    rc = reverse_complement(src)
    for _, w in a:
        assert len(w) == 60 and (w in src or w in rc)
    assert any(w not in src for _, w in a)  # some windows were reverse-complemented
    with pytest.raises(ValueError, match="at least window_bp=1000"):
        WindowSampler(corpus.train, 1000)


def test_reverse_complement() -> None:
    assert reverse_complement("AACGTN") == "NACGTT"
    assert reverse_complement("RYKM") == "KMRY"


def test_validation_windows_round_robin() -> None:
    from hexamer.train.data import Segment

    segs = [Segment("a", "A" * 25), Segment("b", "C" * 12)]
    assert [len(w) for _, w in validation_windows(segs, 10)] == [10, 10, 10, 2, 5]
    capped = validation_windows(segs, 10, max_bp=20)
    assert [w for _, w in capped] == ["A" * 10, "C" * 10]


def test_collate_right_pads(tok: CarbonTokenizer) -> None:
    batch = collate([build_example(tok, "ACGTAC", ""), build_example(tok, "ACGTACGTACGTA", "")], 7)
    assert batch.input_ids.shape == (2, 4)
    assert batch.input_ids[0].tolist()[-2:] == [7, 7]
    assert batch.labels[0].tolist()[-2:] == [IGNORE_INDEX, IGNORE_INDEX]
    assert batch.valid_len.tolist() == [[6, 0, 0, 0], [6, 6, 1, 0]]
    assert np.array_equal(batch.labels[1, :3].numpy() != IGNORE_INDEX, [True, True, True])
