"""VCF/BCF input and output plumbing, apart from what a pipeline does with the records.

* :mod:`~hexamer.io.vcf.records`: :class:`~hexamer.io.vcf.records.VcfRecord`, one
  :class:`~hexamer.io.vcf.records.Variant` per ALT, and ``classify`` (the variant kinds);
* :mod:`~hexamer.io.vcf.reader`: ``read_vcf``, record by record, a bad record with ``problem``
  set and a bad file raising ``VcfInputError`` naming the path;
* :mod:`~hexamer.io.vcf.contig_survey`: how the records' contigs resolve against a FASTA;
* :mod:`~hexamer.io.vcf.header`: the tags, ``END`` and symbolic ALTs htslib completes while
  reading, and a copy of the input that declares them all, for writers.

Contig names are matched to the FASTA's by :mod:`hexamer.io.contigs`, the reference itself is
:class:`hexamer.io.reference.Reference`. pysam is imported on first use.
"""
