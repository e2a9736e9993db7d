"""Tiny look-alike files in each public dataset's schema (``evals.md`` §9), built from real DNA."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

TYPES = ("fungi", "invertebrate", "plant", "protozoa", "vertebrate_mammalian", "vertebrate_other")
_OTHER = {"A": "CGT", "C": "AGT", "G": "ACT", "T": "ACG"}


def write_parquet(
    path: Path, rows: list[dict], schema: pa.Schema | None = None, *, row_group_size: int = 4
) -> Path:
    """``rows`` as a Parquet file in small row groups (so readers cross group boundaries)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path, row_group_size=row_group_size)
    return path


def window_rows(dna: str, n: int, *, window: int, seed: int, chroms: list[str]) -> list[dict]:
    """Rows with a ``window``-bp ref window centred on the variant and the matching var window."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        start = rng.randrange(0, len(dna) - window)
        ref_seq = dna[start : start + window]
        c = window // 2
        ref = ref_seq[c]
        alt = rng.choice(_OTHER[ref])
        var_seq = ref_seq[:c] + alt + ref_seq[c + 1 :]
        rows.append(
            {
                "chrom": chroms[i % len(chroms)],
                "pos": 1000 + start + c + 1,
                "ref": ref,
                "alt": alt,
                "ref_seq": ref_seq,
                "var_seq": var_seq,
            }
        )
    return rows


def write_brca2(root: Path, dna: str, n: int = 24, window: int = 600) -> Path:
    rows = window_rows(dna, n, window=window, seed=1, chroms=["13"])
    rng = random.Random(2)
    classes = ["LOF", "FUNC/INT", "FUNC/INT", "FUNC/INT"]
    for i, r in enumerate(rows):
        r["chrom"] = 13
        r["class"] = classes[i % 4] if i != 5 else "VUS"
        r["score"] = round(rng.uniform(-1.15, 0.41), 3) if i != 7 else None
        r["score_class"] = "B strong"
        r["region"] = rng.choice(["Missense", "Silent", "Intronic"])
        r["hgvs"] = f"c.{i}T>C"
    return write_parquet(root / "brca2-vep" / "brca2_vep.parquet", rows)


def write_traitgym(root: Path, dna: str, n: int = 24, window: int = 600) -> Path:
    rows = window_rows(dna, n, window=window, seed=3, chroms=["1", "X", "7"])
    for i, r in enumerate(rows):
        r["label"] = int(i % 4 == 0)
        r["class"] = "LOF" if r["label"] else "FUNC/INT"
        r["consequence"] = "PLS" if i % 2 else "5_prime_UTR_variant"
        r["tss_dist"] = 48
        r["match_group"] = f"PLS_{i // 3}"
        r["score"] = None
    return write_parquet(root / "traitgym" / "mendelian_traits_vep.parquet", rows)


def write_sequence_recovery(root: Path, dna: str, n: int = 12, ctx: int = 400) -> Path:
    rng = random.Random(4)
    rows = []
    for i in range(n):
        start = rng.randrange(0, len(dna) - ctx - 200)
        length = ctx - rng.randrange(0, 40)
        rows.append(
            {
                "sequence": dna[start : start + length],
                "label": dna[start + length : start + length + 128],
                "type": TYPES[i % len(TYPES)],
            }
        )
    return write_parquet(root / "sequence-recovery" / "eukaryote" / "test.parquet", rows)


def write_hg38(root: Path, chroms: dict[str, str]) -> Path:
    rows = [{"ID": f"chr{c}", "Sequence": s} for c, s in chroms.items()]
    return write_parquet(root / "hg38.parquet", rows)


def clinvar_rows(chroms: dict[str, str], n: int, seed: int, *, coding: bool) -> list[dict]:
    rng = random.Random(seed)
    names = list(chroms)
    rows = []
    for i in range(n):
        c = names[i % len(names)]
        pos = rng.randrange(300, len(chroms[c]))  # 1-based
        ref = chroms[c][pos - 1]
        row = {"chrom": c, "pos": pos, "ref": ref, "alt": rng.choice(_OTHER[ref]), "label": int(i % 2 == 0)}
        if not coding:
            row.update(
                {
                    "gene_symbol": "SAMD11",
                    "clinical_significance_terms": ["benign"],
                    "pathogenicity_group": "pathogenic" if row["label"] else "benign",
                    "qc_star_rating": 2,
                    "variant_type": "single_nucleotide_variant",
                    "consequence_terms": ["intron_variant"],
                    "region_group": "intronic" if i % 3 else "utr",
                    "region_subtype": "intronic" if i % 3 else "utr_5_prime",
                    "coding_status": "non_coding",
                }
            )
        rows.append(row)
    return rows


def write_clinvar(root: Path, chroms: dict[str, str], n: int = 16) -> Path:
    base = root / "clinvar-vep-final"
    write_parquet(base / "coding" / "clinvar_coding.parquet", clinvar_rows(chroms, n, 5, coding=True))
    write_parquet(
        base / "non_coding" / "clinvar_non_coding.parquet", clinvar_rows(chroms, n, 6, coding=False)
    )
    write_hg38(base, chroms)
    return base
