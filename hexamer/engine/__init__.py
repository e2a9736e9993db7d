"""Generation engine: scheduler, KV-cache manager, model runner and sampler (nano-vllm's split)."""

from hexamer.engine.config import EngineConfig
from hexamer.engine.engine import Engine, EngineStats
from hexamer.engine.params import SamplingParams, parse_base_mask
from hexamer.engine.request import Request, RequestState

__all__ = [
    "Engine",
    "EngineConfig",
    "EngineStats",
    "Request",
    "RequestState",
    "SamplingParams",
    "parse_base_mask",
]
