"""Per-base genome tracks (bigWig, bedGraph, UCSC track hub) and strided sliding windows for
sequences longer than the model's context. Command: ``hexamer track``; docs: docs/tracks.md.

    from hexamer.tracks import run_tracks
    run_tracks(carbon, "ref.fa.gz", "out/", regions=["chr20:1-2000000"], kinds=["logprob", "llr"])
"""

from hexamer.tracks.hub import hub_texts, write_hub
from hexamer.tracks.regions import Region, RegionError, parse_region, parse_regions
from hexamer.tracks.run import (
    TrackBlock,
    TrackRunResult,
    TrackSettings,
    iter_blocks,
    read_regions,
    run_tracks,
    window_plan,
)
from hexamer.tracks.values import KINDS, parse_kinds, track_names, track_values
from hexamer.tracks.windows import (
    Window,
    check_stride,
    plan_windows,
    scored_bases,
    strided_base_logprobs,
    strided_score,
    window_capacity,
)
from hexamer.tracks.writers import FORMATS, BedGraphWriter, BigWigWriter, MissingDependencyError

__all__ = [
    "FORMATS",
    "KINDS",
    "BedGraphWriter",
    "BigWigWriter",
    "MissingDependencyError",
    "Region",
    "RegionError",
    "TrackBlock",
    "TrackRunResult",
    "TrackSettings",
    "Window",
    "check_stride",
    "hub_texts",
    "iter_blocks",
    "parse_kinds",
    "parse_region",
    "parse_regions",
    "plan_windows",
    "read_regions",
    "run_tracks",
    "scored_bases",
    "strided_base_logprobs",
    "strided_score",
    "track_names",
    "track_values",
    "window_capacity",
    "window_plan",
    "write_hub",
]
