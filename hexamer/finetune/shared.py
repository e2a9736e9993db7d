"""A head served beside its own language model, on that model's decoder instead of a second copy.

``hexamer serve --model BASE --head HEAD`` holds the language model for generation and scoring; a
probe's or a LoRA-less head's backbone is the same tensors. When every backbone tensor of the head
folder equals the served model's (:func:`same_backbone`: the same names, shapes and values in the
served dtype; a folder whose backbone files are hard links to the model's own, as a probe's best
folder is, is recognised without reading them), the head is built on a view of the served model's
embeddings, decoder layers and final norm (:func:`load_head_on`): only ``score`` is read from the
folder, and the backbone's memory is not spent twice. A head whose backbone differs (full
fine-tuning, a merged LoRA) loads in full, as before.

The view runs the served model's modules as they are, CPU fast-path kernels included, so its
outputs can differ from a separately loaded head's by float rounding (a few 1e-6 in float32);
the server runs the head on the engine thread, never at the same time as a decode step.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import torch
from safetensors import safe_open

from hexamer.finetune.apply import Predictor
from hexamer.finetune.backbone_seal import check_backbone_seal
from hexamer.finetune.folders import (
    HEAD_ARCHITECTURE,
    is_head_folder,
    pad_token_of,
    settings_from_config,
    weight_files,
)
from hexamer.finetune.head import SequenceClassifier
from hexamer.model import LlamaModel, ModelConfig
from hexamer.model.checkpoint import read_safetensors_header
from hexamer.model.config import read_config_json
from hexamer.tokenizer import CarbonTokenizer

__all__ = ["backbone_view", "load_head_on", "load_served_head", "same_backbone"]

PathLike = str | os.PathLike[str]
_SKIPPED = "rotary_emb.inv_freq"
#: config fields that do not change what the decoder computes
_IGNORED = ("tie_word_embeddings", "dtype", "bos_token_id", "eos_token_ids", "pad_token_id")


def _tensors(folder: Path) -> dict[str, tuple[Path, object]]:
    """name -> (file, stored header) of the ``model.*`` tensors of a folder."""
    out = {}
    for file in weight_files(folder):
        for name, stored in read_safetensors_header(file).items():
            if name.startswith("model.") and not name.endswith(_SKIPPED):
                out[name] = (file, stored)
    return out


def _same_file(a: Path, b: Path) -> bool:
    sa, sb = os.stat(a), os.stat(b)
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def same_backbone(head_folder: PathLike, lm_folder: PathLike, dtype: torch.dtype) -> bool:
    """True when the head folder's backbone tensors are exactly the language model folder's
    ``model.*`` tensors (the same names and shapes, and equal values once cast to ``dtype``, the
    dtype both are served in). Tensors in the same file (a hard link) are equal without a read;
    others are compared one at a time."""
    head, lm = _tensors(Path(head_folder)), _tensors(Path(lm_folder))
    if set(head) != set(lm) or any(
        tuple(head[n][1].shape) != tuple(lm[n][1].shape)  # type: ignore[attr-defined]
        for n in head
    ):
        return False
    pairs: dict[tuple[Path, Path], list[str]] = {}
    for name, (file, _) in head.items():
        pairs.setdefault((file, lm[name][0]), []).append(name)
    for (hf, lf), names in pairs.items():
        if _same_file(hf, lf):
            continue
        with (
            safe_open(str(hf), framework="pt", device="cpu") as h,
            safe_open(str(lf), framework="pt", device="cpu") as m,
        ):
            for name in names:
                if not torch.equal(h.get_tensor(name).to(dtype), m.get_tensor(name).to(dtype)):
                    return False
    return True


def backbone_view(lm: LlamaModel) -> LlamaModel:
    """A :class:`LlamaModel` whose embeddings, decoder layers and final norm ARE ``lm``'s (shared
    modules, no copy) and which has no LM head: what a head reads features from."""
    with torch.device("meta"):
        view = LlamaModel(lm.config)
    view.embed_tokens, view.layers, view.norm = lm.embed_tokens, lm.layers, lm.norm
    view.lm_head = None
    return view


def _configs_match(head: ModelConfig, lm: ModelConfig) -> bool:
    a, b = dataclasses.asdict(head), dataclasses.asdict(lm)
    return all(a[k] == b[k] for k in a if k not in _IGNORED)


def load_head_on(folder: PathLike, lm: LlamaModel, lm_folder: PathLike) -> SequenceClassifier | None:
    """The head folder's classifier on :func:`backbone_view` of the served model ``lm`` (loaded
    from ``lm_folder``), reading only its ``score``; None when the backbones differ (the caller
    then loads the head in full)."""
    path = Path(folder)
    if not is_head_folder(path):
        raise ValueError(f"{path} is not a {HEAD_ARCHITECTURE} head folder")
    raw = read_config_json(path / "config.json", path)
    config = ModelConfig.from_dict(
        {**raw, "architectures": ["LlamaForCausalLM"], "tie_word_embeddings": True}
    )
    check_backbone_seal(path)  # a hard link counts as the same backbone only while it is unchanged
    if not _configs_match(config, lm.config) or not same_backbone(path, lm_folder, lm.dtype):
        return None
    tokenizer = CarbonTokenizer.from_pretrained(path)
    model = SequenceClassifier(
        backbone_view(lm), settings_from_config(raw, path / "config.json"), tokenizer, raw,
        pad_token_of(raw, tokenizer, path),
    )  # fmt: skip
    score = next((f for f in weight_files(path) if "score.weight" in read_safetensors_header(f)), None)
    if score is None:
        raise ValueError(f"no tensor 'score.weight' in {path}")
    with safe_open(str(score), framework="pt", device="cpu") as f:
        weight = f.get_tensor("score.weight")
    if tuple(weight.shape) != tuple(model.score.weight.shape):
        raise ValueError(
            f"'score.weight' in {score} has shape {list(weight.shape)}, expected {list(model.score.weight.shape)}"
        )
    with torch.no_grad():
        model.score.weight.copy_(weight.to(model.score.weight.dtype))
    return model.eval()


def load_served_head(
    folder: PathLike, lm: LlamaModel, lm_folder: PathLike | None, *, device: str
) -> tuple[Predictor, bool]:
    """The head served beside ``lm``: on ``lm``'s own decoder when the backbones are the same
    tensors (True), else loaded in full in ``lm``'s dtype on ``device`` (False)."""
    if lm_folder is not None and Path(lm_folder).is_dir():
        model = load_head_on(folder, lm, lm_folder)
        if model is not None:
            return Predictor(model), True
    return Predictor.load(folder, dtype=lm.dtype, device=device), False
