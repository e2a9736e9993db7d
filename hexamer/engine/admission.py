"""Why the engine refuses a request: typed, so each front end can word the refusal its own way
(the server answers an OpenAI-style 400, the library a ``ValueError``) while the decision is made
once, by :meth:`hexamer.engine.Engine.check`."""

from __future__ import annotations

__all__ = ["ContextExceeded", "SpeculationRefused"]


class ContextExceeded(ValueError):
    """The prompt plus the new tokens do not fit one row of the engine (``max_model_len``, at most
    the model's context). ``limit_name`` says which of the two the limit is."""

    def __init__(
        self, prompt_tokens: int, new_tokens: int, limit: int, limit_name: str, message: str | None = None
    ) -> None:
        self.prompt_tokens = prompt_tokens
        self.new_tokens = new_tokens
        self.limit = limit
        self.limit_name = limit_name
        super().__init__(
            message
            or f"prompt of {prompt_tokens} tokens + {new_tokens} new tokens = {prompt_tokens + new_tokens} "
            f"exceeds the {limit_name} of {limit} tokens"
        )


class SpeculationRefused(ValueError):
    """A speculative request the draft model cannot run (no draft, ``mode='text'``,
    ``stop_at_end_tag``, ...); the same request without ``speculative`` may still run."""
