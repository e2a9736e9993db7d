"""A sequence-level head on hexamer's Llama: `SequenceClassifier`.

The model is ``LlamaForSequenceClassification`` in hexamer's own decoder: a bias-free ``score``
linear on one pooled hidden state. Each sequence is fed as ``<dna>SEQ</dna>``, right-padded with
the pad token, so the defaults (``pooling="last"``, ``layer=-1``) pick the final normed state of
``</dna>``, the token ``transformers`` scores (its last token that is not ``pad_token_id``): the
same logits in both libraries. ``pooling="mean"`` averages the content tokens between the tags
instead, and ``layer`` picks another hidden layer (Hugging Face's ``hidden_states`` numbering:
0 = embeddings, ``num_layers`` or -1 = the final normed state); such heads load in
``transformers`` too but only hexamer computes what they were trained on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn

from hexamer.finetune.options import POOLINGS
from hexamer.finetune.task import TaskSpec
from hexamer.model import LlamaModel, PaddedRows, pad_rows
from hexamer.tokenizer import CarbonTokenizer, encode_dna

__all__ = ["HeadSettings", "SequenceClassifier"]


@dataclass(frozen=True)
class HeadSettings:
    """What a head folder records beside the weights (config.json ``hexamer_finetune``).

    ``label_transform`` is the caller's label transform as JSON (z-score of regression labels),
    kept so predictions can be put back on the label scale; ``max_length`` the longest training
    sequence (bp); ``rc_augment`` whether training saw reverse complements, ``rc_average``
    whether predictions should average both strands by default.
    """

    task: TaskSpec
    pooling: str = "last"
    layer: int = -1
    label_transform: dict[str, Any] | None = None
    max_length: int | None = None
    rc_augment: bool = False
    rc_average: bool = False

    def __post_init__(self) -> None:
        if self.pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, got {self.pooling!r}")
        if isinstance(self.layer, bool) or not isinstance(self.layer, int):
            raise ValueError(f"layer must be an integer, got {self.layer!r}")
        if self.max_length is not None and self.max_length < 1:
            raise ValueError(f"max_length must be >= 1 bp, got {self.max_length}")

    def to_json(self) -> dict[str, Any]:
        return {
            "format": 1,
            "task": self.task.to_json(),
            "pooling": self.pooling,
            "layer": self.layer,
            "label_transform": self.label_transform,
            "max_length": self.max_length,
            "rc_augment": self.rc_augment,
            "rc_average": self.rc_average,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> HeadSettings:
        if not isinstance(d, dict) or "task" not in d:
            raise ValueError("hexamer_finetune must be an object with a 'task'")
        if d.get("format", 1) != 1:
            raise ValueError(f"format {d.get('format')!r} is not one this hexamer reads (1); update hexamer")
        return cls(
            task=TaskSpec.from_json(d["task"]),
            pooling=d.get("pooling", "last"),
            layer=d.get("layer", -1),
            label_transform=d.get("label_transform"),
            max_length=d.get("max_length"),
            rc_augment=bool(d.get("rc_augment", False)),
            rc_average=bool(d.get("rc_average", False)),
        )


def layer_index(layer: int, num_layers: int) -> int:
    """``layer`` as a non-negative index into the ``num_layers + 1`` hidden states."""
    if not -(num_layers + 1) <= layer <= num_layers:
        raise ValueError(
            f"layer {layer} is out of range: the model has {num_layers} layers, so layer must be in "
            f"[{-(num_layers + 1)}, {num_layers}] (0 = embeddings, {num_layers} or -1 = final normed state)"
        )
    return layer % (num_layers + 1)


class SequenceClassifier(nn.Module):
    """``backbone`` (a :class:`~hexamer.model.LlamaModel`, LM head dropped) + ``score`` linear.

    ``base_config`` is the backbone's config.json as read, written back (as a classifier's) on
    save. ``forward(ids, mask)`` returns float32 logits ``(B, num_labels)``.
    """

    def __init__(
        self,
        backbone: LlamaModel,
        settings: HeadSettings,
        tokenizer: CarbonTokenizer,
        base_config: dict[str, Any],
        pad_token_id: int,
    ) -> None:
        super().__init__()
        n_layers = backbone.config.num_hidden_layers
        self.layer = layer_index(settings.layer, n_layers)
        backbone.lm_head = None  # never used: frees the untied LM head's memory
        self.backbone = backbone
        w = backbone.embed_tokens.weight
        self.score = nn.Linear(
            backbone.config.hidden_size, settings.task.num_labels, bias=False, dtype=w.dtype, device=w.device
        )
        self.settings = settings
        self.tokenizer = tokenizer
        self.base_config = dict(base_config)
        self.pad_token_id = pad_token_id
        #: the `hexamer.finetune.lora.LoraOptions` of the adapters added to it, else None
        self.lora_options: Any = None

    @property
    def task(self) -> TaskSpec:
        return self.settings.task

    @property
    def device(self) -> torch.device:
        return self.backbone.device

    @property
    def context_length(self) -> int:
        return self.backbone.config.max_position_embeddings

    def with_settings(self, **changes: Any) -> None:
        """Replace fields of :attr:`settings` (not the task: the head's width depends on it)."""
        if "task" in changes:
            raise ValueError("the task of a head cannot change; build a new classifier")
        self.settings = replace(self.settings, **changes)
        self.layer = layer_index(self.settings.layer, self.backbone.config.num_hidden_layers)

    def token_ids(self, sequence: str, index: int = 0) -> list[int]:
        """``<dna>`` + the 6-mer ids of ``sequence`` + ``</dna>``; too long for the context: an error."""
        layout = self.tokenizer.layout
        ids = [layout.begin_id, *encode_dna(sequence, layout).ids.tolist(), layout.end_id]
        if len(ids) > self.context_length:
            raise ValueError(
                f"sequence {index + 1} ({len(sequence)} bp) needs {len(ids)} tokens, more than the "
                f"model's context of {self.context_length}"
            )
        return ids

    def encode(self, sequences: Sequence[str]) -> PaddedRows:
        """Right-padded token rows of ``sequences`` (padding = ``pad_token_id``)."""
        if not sequences:
            raise ValueError("no sequences to encode")
        rows = []
        for i, s in enumerate(sequences):
            if not isinstance(s, str) or not s:
                raise ValueError(f"sequence {i + 1} is empty or not text")
            rows.append(self.token_ids(s, i))
        return pad_rows(rows, self.pad_token_id, side="right")

    def features(self, ids: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """Pooled hidden states ``(B, H)`` in the model dtype, for right-padded rows."""
        n_layers = self.backbone.config.num_hidden_layers
        final = self.layer == n_layers
        out = self.backbone(
            ids,
            attention_mask=None if mask is None or _right_padded(mask) else mask,
            logits_at="none",
            return_hidden=final,
            return_layer_hidden=not final,
        )
        if final:
            hidden = out.hidden
        else:
            assert out.layer_hidden is not None
            hidden = out.layer_hidden[self.layer]
        assert hidden is not None
        b, t = ids.shape
        lengths = mask.sum(-1) if mask is not None else torch.full((b,), t, device=ids.device)
        if self.settings.pooling == "last":
            return hidden[torch.arange(b, device=hidden.device), lengths.to(hidden.device) - 1]
        cols = torch.arange(t, device=hidden.device)[None, :]
        content = (cols >= 1) & (cols < lengths.to(hidden.device)[:, None] - 1)  # between the tags
        weights = content.to(hidden.dtype)
        total = (hidden * weights[..., None]).sum(1)
        return total / weights.sum(1, keepdim=True).clamp(min=1)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.score(self.features(ids, mask)).float()

    def logits_of(self, sequences: Sequence[str]) -> torch.Tensor:
        """Float32 logits of ``sequences`` as one batch (no gradient bookkeeping of its own)."""
        rows = self.encode(sequences)
        return self(rows.ids_on(self.device), rows.mask_on(self.device))


def _right_padded(mask: torch.Tensor) -> bool:
    """Each row's real tokens come first (padding only at the end, as :meth:`encode` pads).

    Then the padding mask changes nothing a head reads: under the causal mask a real token
    never sees a later position, and positions count from 0 either way, so the backbone runs
    without it (plain causal attention, no dense ``(B, 1, T, T)`` mask to build and apply).
    Only the padding positions' own states differ, and pooling never reads them.
    """
    m = mask.to(torch.bool)
    return bool((m[:, 1:] <= m[:, :-1]).all())


def init_score(score: nn.Linear, std: float, seed: int) -> None:
    """Normal(0, ``std``) head weights, as ``transformers`` initialises ``score``."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        w = torch.randn(score.weight.shape, generator=gen) * std
        score.weight.copy_(w.to(score.weight.dtype))
