"""Sequence embeddings from Carbon hidden states.

* :mod:`~hexamer.embed.pooling`: :func:`embed_sequences` (mean / last / separator pooling of any
  layer, long sequences chunked);
* :mod:`~hexamer.embed.chunks`: how long sequences are cut;
* :mod:`~hexamer.embed.writers`: Parquet or ``.npy`` + ids output.

    from hexamer import Carbon
    from hexamer.embed import embed_sequences, write_embeddings
    from hexamer.io import read_sequences
    m = Carbon.from_pretrained("path/to/Carbon-500M")
    write_embeddings("emb.parquet", embed_sequences(m, read_sequences("genes.fa"), pool="mean"))
"""

from hexamer.embed.chunks import Chunk, chunk_plan
from hexamer.embed.pooling import POOLS, embed_sequences
from hexamer.embed.writers import EMBEDDING_FORMATS, ids_path, write_embeddings

__all__ = [
    "EMBEDDING_FORMATS",
    "POOLS",
    "Chunk",
    "chunk_plan",
    "embed_sequences",
    "ids_path",
    "write_embeddings",
]
