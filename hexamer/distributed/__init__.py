"""Scale-out on Ray: ``hexamer vep``, ``score``, ``embed``, ``ism`` and ``generate`` across a
cluster, with the single-process output byte for byte.

* :mod:`~hexamer.distributed.cluster`: joining a cluster; :class:`PoolSpec`, the actors a job asks
  for; :class:`WorkerPool`, model-holding actors;
* :mod:`~hexamer.distributed.sharding`: records cut into shards that keep their global index;
* :mod:`~hexamer.distributed.scheduler`: shards streamed to actors, retried, bounded in flight;
* :mod:`~hexamer.distributed.store`: shards committed atomically with checksums (``resume``);
* :mod:`~hexamer.distributed.driver`: what every driver shares (checks, run folder, shard loop);
* :mod:`~hexamer.distributed.blocks`: jobs scored by the VEP engine in whole blocks (vep, ism);
* :mod:`~hexamer.distributed.vep`: the VEP driver, :func:`run_vep`;
* :mod:`~hexamer.distributed.score`: ``hexamer score``'s driver, :func:`score`;
* :mod:`~hexamer.distributed.embed`: ``hexamer embed``'s driver, :func:`embed`;
* :mod:`~hexamer.distributed.ism`: ``hexamer ism``'s driver, :func:`ism`;
* :mod:`~hexamer.distributed.generate`: ``hexamer generate``'s driver, :func:`generate`.

    from hexamer.distributed import PoolSpec, run_vep
    run_vep("path/to/model", "cohort.vcf.gz", "hg38.fa.gz", "scored.vcf.gz",
            pool=PoolSpec(workers=8), resume=True)

Ray is the optional extra ``hexamer[ray]``; this package imports without it and says so on use.
Design and cluster recipes: docs/distributed.md.
"""

from hexamer.distributed.cluster import PoolSpec, RayUnavailableError, WorkerPool, connect, require_ray
from hexamer.distributed.embed import EmbedRunResult, embed
from hexamer.distributed.faults import FaultPlan, InjectedFault
from hexamer.distributed.generate import generate
from hexamer.distributed.ism import IsmRunResult, ism
from hexamer.distributed.score import ScoreRunResult, score
from hexamer.distributed.store import run_folder
from hexamer.distributed.vep import run_vep, single_process_command

__all__ = [
    "EmbedRunResult",
    "FaultPlan",
    "InjectedFault",
    "IsmRunResult",
    "PoolSpec",
    "RayUnavailableError",
    "ScoreRunResult",
    "WorkerPool",
    "connect",
    "embed",
    "generate",
    "ism",
    "require_ray",
    "run_folder",
    "run_vep",
    "score",
    "single_process_command",
]
