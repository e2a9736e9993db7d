"""What every endpoint needs: the model, tokenizer, engine thread, limits and metrics."""

from __future__ import annotations

from dataclasses import dataclass

from hexamer.carbon import Carbon
from hexamer.server.detok import TokenStrings
from hexamer.server.errors import ApiError
from hexamer.server.metrics import ServerMetrics
from hexamer.server.settings import ServerSettings
from hexamer.server.worker import EngineWorker
from hexamer.tokenizer import CarbonTokenizer


@dataclass
class ServerState:
    carbon: Carbon
    settings: ServerSettings
    worker: EngineWorker
    metrics: ServerMetrics
    strings: TokenStrings
    model_name: str
    model_root: str
    eos_ids: tuple[int, ...]

    @property
    def tokenizer(self) -> CarbonTokenizer:
        return self.carbon.tokenizer

    @property
    def max_len(self) -> int:
        """Tokens one sequence may hold (prompt + output): the KV cache's row length."""
        return self.worker.max_len

    @property
    def vocab_size(self) -> int:
        return len(self.carbon.tokenizer)

    def check_model(self, model: str | None) -> None:
        if model is not None and model not in (self.model_name, self.model_root):
            raise ApiError(
                404, f"The model `{model}` does not exist (this server serves `{self.model_name}`).", "model"
            )
