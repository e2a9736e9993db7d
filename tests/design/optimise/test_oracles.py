"""Oracles against brute force written separately: PWM scans and motif counts on both strands, the
checks on a callable's output, and a head folder's outputs against its Predictor."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from hexamer.design.optimise import CallableOracle, HeadOracle, MotifCountOracle, PwmOracle
from hexamer.io import reverse_complement

RNG = np.random.default_rng(7)


def _random(n: int, length: int) -> list[str]:
    return ["".join(RNG.choice(list("ACGT"), length)) for _ in range(n)]


def _brute_pwm(seq: str, w: np.ndarray) -> list[float]:
    width = len(w)
    out = []
    for strand in (seq, reverse_complement(seq)):
        for i in range(len(seq) - width + 1):
            out.append(sum(w[j, "ACGT".index(strand[i + j])] for j in range(width)))
    return out


def test_pwm_max_and_count_match_brute_force() -> None:
    w = RNG.normal(size=(5, 4))
    seqs = _random(6, 30)
    best = PwmOracle(w)(seqs)
    count = PwmOracle(w, mode="count", threshold=1.0)(seqs)
    for s, b, c in zip(seqs, best, count, strict=True):
        scores = _brute_pwm(s, w)
        assert b == pytest.approx(max(scores))
        assert c == sum(x >= 1.0 for x in scores)


def test_pwm_from_counts_prefers_the_consensus() -> None:
    pwm = PwmOracle.from_counts(np.eye(4)[[0, 1, 2]] * 20)
    hits = pwm(["TTTACGTTT", "TTTTTTTTT", "TTCGTTTTT"])  # ACG forward; CGT is ACG's reverse complement
    assert hits[0] == pytest.approx(hits[2]) and hits[0] > hits[1]


def _brute_count(seq: str, motif: str) -> int:
    iupac = {"A": "A", "C": "C", "G": "G", "T": "T", "N": "[ACGT]", "R": "[AG]", "Y": "[CT]", "W": "[AT]"}
    fwd = re.compile("(?=" + "".join(iupac[c] for c in motif) + ")")
    rc = reverse_complement(motif)
    rev = re.compile("(?=" + "".join(iupac[c] for c in rc) + ")")
    return len({m.start() for m in fwd.finditer(seq)} | {m.start() for m in rev.finditer(seq)})


@pytest.mark.parametrize("motif", ["GAATTC", "TATAWR", "CANNTG", "ACG"])
def test_motif_count_both_strands(motif: str) -> None:
    seqs = [*_random(8, 40), "GAATTCGAATTC", "CACGTGCAATTG"]
    got = MotifCountOracle(motif)(seqs)
    assert got.tolist() == [_brute_count(s, motif) for s in seqs]


def test_callable_oracle_is_checked() -> None:
    assert CallableOracle(lambda s: [x.count("A") for x in s])(["AAC", "CCC"]).tolist() == [2.0, 0.0]
    with pytest.raises(ValueError, match="shape"):
        CallableOracle(lambda s: [1.0])(["A", "C"])
    with pytest.raises(ValueError, match="non-finite"):
        CallableOracle(lambda s: [float("nan")] * len(s), name="bad")(["A", "C"])


@pytest.mark.parametrize(
    ("args", "match"),
    [((np.zeros((3, 3)),), "columns"), ((np.full((2, 4), np.nan),), "finite")],
)
def test_bad_pwm(args: tuple, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        PwmOracle(*args)
    with pytest.raises(ValueError, match="threshold"):
        PwmOracle(np.zeros((2, 4)), mode="count")
    with pytest.raises(ValueError, match="IUPAC"):
        MotifCountOracle("ACX")


def test_head_oracle_target_and_specificity(tmp_path: Path) -> None:
    from hexamer.finetune.apply import Predictor
    from hexamer.testing.heads import build_head_folder

    folder = build_head_folder(
        tmp_path / "head", targets=("liver", "brain", "heart"), zscore=((0.0, 1.0, 2.0), (1.0, 1.0, 1.0))
    )
    seqs = _random(4, 24)
    raw = Predictor.load(folder).predict(seqs)
    assert np.allclose(HeadOracle.load(folder, "brain")(seqs), raw[:, 1])
    spec = HeadOracle.load(folder, "liver", specificity=True)
    assert np.allclose(spec(seqs), raw[:, 0] - raw[:, 1:].max(axis=1))
    assert spec.name == "specificity:liver"
    with pytest.raises(ValueError, match="name a target"):
        HeadOracle.load(folder)
    with pytest.raises(ValueError, match="not an output"):
        HeadOracle.load(folder, "lung")
