"""Head folders: a `SequenceClassifier` saved and read in ``transformers``' own layout.

A head folder is what ``LlamaForSequenceClassification.save_pretrained`` writes: config.json
(the backbone's config with ``architectures``, ``num_labels``-sized ``id2label``/``label2id``,
``problem_type``, ``pad_token_id``, ``dtype``) and ``model.safetensors`` (``model.*`` backbone
tensors + ``score.weight``, no LM head), plus the base folder's tokenizer files and a
``hexamer_finetune`` entry in config.json that ``transformers`` ignores. So
``AutoModelForSequenceClassification.from_pretrained(folder)`` reads a folder hexamer wrote,
and hexamer reads one ``transformers`` wrote (given the tokenizer files beside it).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from hexamer.finetune.backbone_seal import check_backbone_seal
from hexamer.finetune.head import HeadSettings, SequenceClassifier, init_score
from hexamer.finetune.task import TaskSpec
from hexamer.model import LlamaModel, ModelConfig, load_model, resolve_dtype
from hexamer.model.checkpoint import read_safetensors_header
from hexamer.model.config import read_config_json
from hexamer.tokenizer import CarbonTokenizer
from hexamer.train.checkpoint import atomic_folder

__all__ = [
    "HEAD_ARCHITECTURE",
    "is_head_folder",
    "load_classifier",
    "new_classifier",
    "pad_token_of",
    "save_classifier",
    "settings_from_config",
    "weight_files",
    "write_head_files",
]

HEAD_ARCHITECTURE = "LlamaForSequenceClassification"
_WEIGHTS = "model.safetensors"
_INDEX = "model.safetensors.index.json"
_DTYPE_NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}
#: the remote-code tokenizer of official folders: copied (never run) so transformers users can load it
_EXTRA_TOKENIZER_FILES = ("tokenizer.py",)


def _config(folder: Path) -> dict[str, Any]:
    if not folder.is_dir():
        raise FileNotFoundError(f"model folder not found: {folder}")
    return read_config_json(folder / "config.json", folder)


def is_head_folder(folder: str | os.PathLike[str]) -> bool:
    """True when ``folder``'s config.json names ``LlamaForSequenceClassification``."""
    archs = _config(Path(folder)).get("architectures")
    return isinstance(archs, list) and HEAD_ARCHITECTURE in archs


def new_classifier(
    base_folder: str | os.PathLike[str],
    settings: HeadSettings,
    *,
    dtype: torch.dtype | str = torch.float32,
    device: torch.device | str = "cpu",
    seed: int = 0,
) -> SequenceClassifier:
    """A classifier on the language model in ``base_folder``, its head drawn as transformers does."""
    folder = Path(base_folder)
    if is_head_folder(folder):
        raise ValueError(
            f"{folder} is a sequence-classification head folder ({HEAD_ARCHITECTURE}), not a language "
            "model: fine-tune from the base model folder, or load this one with load_classifier"
        )
    raw = _config(folder)
    backbone, _ = load_model(folder, dtype=dtype, device=device)
    if not isinstance(backbone, LlamaModel) or any(
        p.dtype not in _DTYPE_NAMES for p in backbone.parameters()
    ):
        raise ValueError(f"{folder}: fine-tuning needs a float model, not an int8 one")
    tokenizer = CarbonTokenizer.from_pretrained(folder)
    model = SequenceClassifier(backbone, settings, tokenizer, raw, pad_token_of(raw, tokenizer, folder))
    init_score(model.score, float(raw.get("initializer_range", 0.02)), seed)
    return model


def pad_token_of(raw: dict[str, Any], tokenizer: CarbonTokenizer, folder: Path) -> int:
    """The pad id a head folder's rows use: config.json's ``pad_token_id``, else the tokenizer's
    pad (or eos) token."""
    pad = raw.get("pad_token_id")
    if isinstance(pad, int) and not isinstance(pad, bool):
        return pad
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    if pad is None:
        raise ValueError(f"{folder}: no pad_token_id in config.json nor a pad/eos token in the tokenizer")
    return pad


def head_config(model: SequenceClassifier, dtype: torch.dtype) -> dict[str, Any]:
    """config.json of a head folder, as ``LlamaForSequenceClassification.save_pretrained`` writes it."""
    task = model.task
    config = {k: v for k, v in model.base_config.items() if k not in ("torch_dtype", "hexamer_finetune")}
    names = task.id2label()
    config.update(
        architectures=[HEAD_ARCHITECTURE],
        id2label={str(i): name for i, name in names.items()},
        label2id={name: i for i, name in names.items()},
        problem_type=task.problem_type,
        pad_token_id=model.pad_token_id,
        dtype=_DTYPE_NAMES[dtype],
        hexamer_finetune=model.settings.to_json(),
    )
    return config


def head_tensors(model: SequenceClassifier, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """Weights under ``LlamaForSequenceClassification`` names."""
    out = {}
    for name, p in model.backbone.named_parameters():
        out[f"model.{name}"] = p.detach().to(device="cpu", dtype=dtype).contiguous()
    out["score.weight"] = model.score.weight.detach().to(device="cpu", dtype=dtype).contiguous()
    return out


def save_classifier(
    model: SequenceClassifier,
    folder: str | os.PathLike[str],
    *,
    dtype: torch.dtype | str = torch.float32,
    extra_files: dict[str, str] | None = None,
) -> Path:
    """Write ``model`` as a head folder at ``folder``, atomically (an existing folder is replaced).

    ``extra_files`` (name -> text) are written beside the weights. A model with LoRA adapters
    must be merged first (:func:`hexamer.finetune.lora.merge_lora`).
    """
    target = resolve_dtype(dtype, model.backbone.config)
    tensors = head_tensors(model, target)
    if any("lora_" in name for name in tensors):
        raise ValueError("the model still holds LoRA adapters: merge them before saving a head folder")

    def fill(tmp: Path) -> None:
        write_head_files(model, tmp, target)
        save_file(tensors, str(tmp / _WEIGHTS), metadata={"format": "pt"})
        for name, text in (extra_files or {}).items():
            (tmp / name).write_text(text, encoding="utf-8")

    return atomic_folder(Path(folder), fill)


def write_head_files(model: SequenceClassifier, folder: Path, dtype: torch.dtype) -> None:
    """Everything of a head folder but its weights: config.json (declaring ``dtype``) and the
    base folder's tokenizer files."""
    config = head_config(model, dtype)
    source = Path(model.tokenizer.name_or_path) if model.tokenizer.name_or_path else None
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    model.tokenizer.copy_files_to(folder)
    for name in _EXTRA_TOKENIZER_FILES:
        if source is not None and (source / name).is_file():
            shutil.copy2(source / name, folder / name)


def weight_files(folder: str | os.PathLike[str]) -> list[Path]:
    """The safetensors files of a model folder: those its index names, else ``model.safetensors``."""
    return _weight_files(Path(folder))


def settings_from_config(raw: dict[str, Any], config_path: Path) -> HeadSettings:
    """The folder's ``hexamer_finetune`` entry, or what ``transformers``' own fields imply."""
    if "hexamer_finetune" in raw:
        try:
            return HeadSettings.from_json(raw["hexamer_finetune"])
        except ValueError as exc:
            raise ValueError(f"{config_path}: hexamer_finetune: {exc}") from None
    id2label = raw.get("id2label") or {"0": "LABEL_0", "1": "LABEL_1"}
    try:
        names = tuple(str(id2label[str(i)]) for i in range(len(id2label)))
    except KeyError:
        raise ValueError(f"{config_path}: id2label keys must be 0..{len(id2label) - 1}") from None
    problem = raw.get("problem_type")
    if problem == "regression" or (problem is None and len(names) == 1):
        task = TaskSpec("regression", names)
    elif problem == "multi_label_classification":
        task = TaskSpec("multilabel", names)
    elif problem in (None, "single_label_classification"):
        kind = "binary" if len(names) == 2 else "multiclass"
        task = TaskSpec(kind, ("label",), names)
    else:
        raise ValueError(f"{config_path}: unknown problem_type {problem!r}")
    return HeadSettings(task)


def _weight_files(folder: Path) -> list[Path]:
    index = folder / _INDEX
    if index.is_file():
        data = read_config_json(index, folder)
        weight_map = data.get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise ValueError(f"{index} has no 'weight_map' object")
        return sorted({folder / str(f) for f in weight_map.values()})
    if (folder / _WEIGHTS).is_file():
        return [folder / _WEIGHTS]
    raise FileNotFoundError(
        f"no {_WEIGHTS} or {_INDEX} in {folder} (head folders are read from safetensors only)"
    )


def load_classifier(
    folder: str | os.PathLike[str],
    *,
    dtype: torch.dtype | str = torch.float32,
    device: torch.device | str = "cpu",
) -> SequenceClassifier:
    """Read a head folder (hexamer's or ``transformers``'); every tensor name and shape is checked
    against config.json before one is read."""
    folder = Path(folder)
    raw = _config(folder)
    config_path = folder / "config.json"
    if not is_head_folder(folder):
        raise ValueError(
            f"{folder} is not a sequence-classification head folder (config.json 'architectures' is "
            f"{raw.get('architectures')!r}, not {HEAD_ARCHITECTURE!r}); a language model folder is "
            "fine-tuned with hexamer.finetune.fit or loaded with hexamer.model.load_model"
        )
    settings = settings_from_config(raw, config_path)
    config = ModelConfig.from_dict(
        {**raw, "architectures": ["LlamaForCausalLM"], "tie_word_embeddings": True}
    )
    target = resolve_dtype(dtype, config)
    if not (folder / "tokenizer.json").exists():
        raise FileNotFoundError(
            f"{folder} has no tokenizer.json: copy the base model's tokenizer files into it "
            "(transformers' save_pretrained of a model alone does not write them)"
        )
    check_backbone_seal(folder)
    tokenizer = CarbonTokenizer.from_pretrained(folder)
    with torch.device("meta"):
        backbone = LlamaModel(config)
    model = SequenceClassifier(backbone, settings, tokenizer, raw, pad_token_of(raw, tokenizer, folder))
    model.to_empty(device=device)
    model.to(target)
    _read_weights(model, folder, target, torch.device(device))
    model.eval()
    return model


def _read_weights(model: SequenceClassifier, folder: Path, dtype: torch.dtype, device: torch.device) -> None:
    expected = {f"model.{n}": p for n, p in model.backbone.named_parameters()}
    expected["score.weight"] = model.score.weight
    files = _weight_files(folder)
    owner: dict[str, Path] = {}
    for file in files:
        for name, stored in read_safetensors_header(file).items():
            if name.endswith("rotary_emb.inv_freq"):
                continue
            if name not in expected:
                hint = (
                    " (an LM head: this looks like a language model's weights)"
                    if name == "lm_head.weight"
                    else ""
                )
                raise ValueError(f"unexpected tensor '{name}' in {file}{hint}")
            if stored.shape != tuple(expected[name].shape):
                raise ValueError(
                    f"tensor '{name}' in {file} has shape {list(stored.shape)}, expected "
                    f"{list(expected[name].shape)} (from {folder / 'config.json'})"
                )
            owner[name] = file
    missing = sorted(set(expected) - set(owner))
    if missing:
        raise ValueError(f"missing tensor(s) in {folder}: {', '.join(repr(m) for m in missing[:5])}")
    with torch.no_grad():
        for file in files:
            try:
                with safe_open(str(file), framework="pt", device="cpu") as f:
                    for name in (n for n, o in owner.items() if o == file):
                        expected[name].copy_(f.get_tensor(name).to(dtype=dtype, device=device))
            except SafetensorError as exc:
                raise ValueError(f"{file} could not be read ({exc})") from None
