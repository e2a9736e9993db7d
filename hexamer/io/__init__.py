"""Sequence input and result output for the CLI and pipelines.

* :mod:`~hexamer.io.sequences`: read FASTA/FASTQ, ``.txt`` and id/sequence tables, reporting bad
  records without stopping;
* :mod:`~hexamer.io.writers`: write FASTA and Parquet/TSV/CSV/JSONL tables atomically, whole or
  streamed;
* :mod:`hexamer.io.vcf`: VCF/BCF records and headers (imported on its own: it is not named here).

pysam and pyarrow are imported on first use, so importing this package stays cheap.
"""

from hexamer.io.sequences import (
    IUPAC_CODES,
    SEQUENCE_FORMATS,
    BadRecord,
    SequenceInputError,
    SequenceRecord,
    count_non_acgt,
    normalize_sequence,
    read_sequences,
    reverse_complement,
    sequence_format,
)
from hexamer.io.writers import TABLE_FORMATS, TableWriter, atomic_path, table_format, write_fasta, write_table

__all__ = [
    "IUPAC_CODES",
    "SEQUENCE_FORMATS",
    "TABLE_FORMATS",
    "BadRecord",
    "SequenceInputError",
    "SequenceRecord",
    "TableWriter",
    "atomic_path",
    "count_non_acgt",
    "normalize_sequence",
    "read_sequences",
    "reverse_complement",
    "sequence_format",
    "table_format",
    "write_fasta",
    "write_table",
]
