"""Generation engine: scheduler, KV-cache manager, model runner and sampler (nano-vllm's split)."""

from hexamer.engine.admission import ContextExceeded, SpeculationRefused
from hexamer.engine.config import EngineConfig
from hexamer.engine.engine import Engine, EngineStats, StepOutput
from hexamer.engine.params import SamplingParams, parse_base_mask
from hexamer.engine.request import Request, RequestState
from hexamer.engine.spec_config import SpecConfig, SpecStats

__all__ = [
    "ContextExceeded",
    "Engine",
    "EngineConfig",
    "EngineStats",
    "Request",
    "RequestState",
    "SamplingParams",
    "SpecConfig",
    "SpecStats",
    "SpeculationRefused",
    "StepOutput",
    "parse_base_mask",
]
