"""Generation engine: scheduler, KV-cache manager, model runner and sampler (nano-vllm's split)."""

from hexamer.engine.config import EngineConfig
from hexamer.engine.engine import Engine, EngineStats
from hexamer.engine.params import SamplingParams, parse_base_mask
from hexamer.engine.request import Request, RequestState
from hexamer.engine.spec_config import SpecConfig, SpecStats

__all__ = [
    "Engine",
    "EngineConfig",
    "EngineStats",
    "Request",
    "RequestState",
    "SamplingParams",
    "SpecConfig",
    "SpecStats",
    "parse_base_mask",
]
