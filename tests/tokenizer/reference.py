"""A deliberately plain, per-character restatement of the official encode rules
(shared/spec/tokenizer_fns.md §2), written independently of hexamer's vectorised code so the two
can be compared on random inputs."""

from __future__ import annotations

import itertools

from tokenizers import Tokenizer


def reference_encode(text: str, bpe: Tokenizer, dna_start: int, auto_dna_tags: bool = False) -> list[int]:
    if auto_dna_tags and "<dna>" not in text:
        text = "<dna>" + text + "</dna>"
    kmer_ids = {"".join(p): dna_start + 3 + i for i, p in enumerate(itertools.product("ATCG", repeat=6))}
    out: list[int] = []

    def text_seg(piece: str) -> None:
        if piece:
            out.extend(bpe.encode(piece, add_special_tokens=False).ids)

    def dna_seg(piece: str) -> None:
        if piece == "<dna>":
            start, end, content = True, False, ""
        elif piece == "</dna>":
            start, end, content = False, True, ""
        else:
            start = piece.startswith("<dna>")
            end = piece.endswith("</dna>")
            rest = piece[5:] if start else piece
            if rest.endswith("</dna>"):
                rest = rest[:-6]
            else:
                end = False
            content = rest.strip()
        if start:
            out.append(dna_start)
        seq = content.upper()
        for i in range(0, len(seq), 6):
            chunk = seq[i : i + 6]
            chunk = chunk + "A" * (6 - len(chunk))
            out.append(kmer_ids.get(chunk, dna_start + 2))
        if end:
            out.append(dna_start + 1)

    i = 0
    while i < len(text):
        s = text.find("<dna>", i)
        e = text.find("</dna>", i)
        if s == -1 and e == -1:
            text_seg(text[i:])
            break
        if s == -1:
            dna_seg(text[i : e + 6])
            i = e + 6
        elif e == -1:
            text_seg(text[i:s])
            dna_seg(text[s:])
            break
        elif s < e:
            text_seg(text[i:s])
            dna_seg(text[s : e + 6])
            i = e + 6
        else:
            dna_seg(text[i : e + 6])
            i = e + 6
    return out
