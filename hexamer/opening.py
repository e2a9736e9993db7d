"""Picklable recipes for opening a model: what a worker process (a Ray actor, a job array task)
receives instead of the model itself.

    spec = LocalSpec("path/to/Carbon-3B", dtype="bfloat16", threads=4)
    carbon = spec.open()                  # Carbon over a LocalBackend, in this process
    RemoteSpec("http://host:8000", model="Carbon-3B").open()   # Carbon over a RemoteBackend

A spec holds plain values only (strings, numbers, a dict of engine options), so it pickles to a
few hundred bytes and opens the same model anywhere the path or URL resolves. Both ``open()``
return a :class:`~hexamer.carbon.Carbon`, through its own constructors (``from_pretrained``,
``from_server``); the imports wait for ``open()``, so unpickling a spec loads no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hexamer.carbon import Carbon

__all__ = ["LocalSpec", "ModelSpec", "RemoteSpec"]


@dataclass(frozen=True)
class LocalSpec:
    """A model folder (or hub id) to load in the opening process (:meth:`Carbon.from_pretrained`).

    ``threads`` sets PyTorch's intra-op threads when opened (None: leave as is); ``engine`` holds
    the generation-engine options ``Carbon.from_pretrained`` takes (``max_batch_size``, ...)."""

    model_dir: str
    dtype: str = "auto"
    device: str | None = None
    threads: int | None = None
    revision: str | None = None
    engine: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {self.threads}")

    def open(self) -> Carbon:
        import torch

        from hexamer.carbon import Carbon

        if self.threads is not None:
            torch.set_num_threads(self.threads)
        return Carbon.from_pretrained(
            self.model_dir, dtype=self.dtype, device=self.device, revision=self.revision, **self.engine
        )


@dataclass(frozen=True)
class RemoteSpec:
    """A served model (:meth:`Carbon.from_server`); ``options`` are its keyword options
    (``tokenizer``, ``top_n``, ``max_in_flight``, ``backend`` = the server kind, ...)."""

    url: str
    model: str | None = None
    api_key: str | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def open(self) -> Carbon:
        from hexamer.carbon import Carbon

        return Carbon.from_server(self.url, model=self.model, api_key=self.api_key, **self.options)


#: Either spec: ``spec.open()`` gives a ``Carbon`` whose ``.backend`` is where the model runs.
ModelSpec = LocalSpec | RemoteSpec
