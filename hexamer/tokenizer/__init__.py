"""Hybrid Carbon tokenizer: byte-level BPE for text, non-overlapping k-mers inside ``<dna>``."""

from hexamer.tokenizer.dna import DnaEncoding, decode_kmers, encode_dna, encode_kmers, kmer_digits
from hexamer.tokenizer.encoding import BatchEncoding, DnaSpan, Encoding
from hexamer.tokenizer.folder import ModelFolderError, resolve_model_dir
from hexamer.tokenizer.hybrid import CarbonTokenizer, UntaggedDnaWarning
from hexamer.tokenizer.layout import BASES, DnaLayout
from hexamer.tokenizer.segment import Segment, split_segments

__all__ = [
    "BASES",
    "BatchEncoding",
    "CarbonTokenizer",
    "DnaEncoding",
    "DnaLayout",
    "DnaSpan",
    "Encoding",
    "ModelFolderError",
    "Segment",
    "UntaggedDnaWarning",
    "decode_kmers",
    "encode_dna",
    "encode_kmers",
    "kmer_digits",
    "resolve_model_dir",
    "split_segments",
]
