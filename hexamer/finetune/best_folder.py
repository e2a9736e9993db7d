"""The best-checkpoint folders of a fit, written without rewriting what did not change.

A probe's backbone is frozen, so its best folder is the new ``score`` head beside the base
model's weight files, **hard-linked** (no bytes copied): ``model.safetensors.index.json`` maps the
backbone tensors to ``backbone-NNNNN.safetensors`` (links to the base's files) and
``score.weight`` to ``score.safetensors``, a layout ``transformers`` and hexamer both load, plus a
seal hexamer checks on reading (the links' size, time and SHA-256: a base file rewritten in place
must not change a head silently; :mod:`hexamer.finetune.backbone_seal`). When
the base's files cannot be linked (another filesystem, or files holding more than the backbone,
e.g. an untied LM head), they are copied or written once to ``<output_dir>/backbone`` and linked
from there. A LoRA run writes only its adapter (``best_adapter``, megabytes) at each improvement
and merges the best one into the plain head folder once, when the run ends. Full fine-tuning
changes every weight, so each improving evaluation (only those) writes the whole folder.

Every folder is written atomically (a hidden sibling swapped into place) and read back: the
names and shapes of every tensor are checked against the model before the write counts.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from hexamer.finetune.backbone_seal import file_seal, write_backbone_seal
from hexamer.finetune.folders import save_classifier, weight_files, write_head_files
from hexamer.finetune.head import SequenceClassifier
from hexamer.finetune.lora import load_adapter_weights, lora_merged, save_adapter
from hexamer.finetune.options import FitOptions
from hexamer.model.checkpoint import read_safetensors_header
from hexamer.train.checkpoint import atomic_folder

__all__ = ["BACKBONE_STORE", "BEST_ADAPTER_DIR", "BEST_DIR", "BestWriter", "save_linked_head"]

BEST_DIR = "best"
BEST_ADAPTER_DIR = "best_adapter"
#: ``<output_dir>/backbone``: the frozen backbone's files, when the base's cannot be linked
BACKBONE_STORE = "backbone"
_INDEX = "model.safetensors.index.json"
_SCORE = "score.safetensors"
_SKIPPED = "rotary_emb.inv_freq"


def _expected(model: SequenceClassifier) -> dict[str, torch.Tensor]:
    return {f"model.{n}": p for n, p in model.backbone.named_parameters()}


def _holds_backbone(model: SequenceClassifier, files: list[Path]) -> bool:
    """True when ``files`` hold exactly the backbone's tensors (names, shapes) and their values,
    cast to the model's dtype, are the model's own (read once)."""
    expected = _expected(model)
    owner: dict[str, Path] = {}
    for file in files:
        for name, stored in read_safetensors_header(file).items():
            if name.endswith(_SKIPPED):
                continue
            if name not in expected or name in owner or stored.shape != tuple(expected[name].shape):
                return False
            owner[name] = file
    if set(owner) != set(expected):
        return False
    for file in files:
        with safe_open(str(file), framework="pt", device="cpu") as f:
            for name in (n for n, o in owner.items() if o == file):
                p = expected[name]
                if not torch.equal(f.get_tensor(name).to(p.dtype), p.detach().cpu()):
                    return False
    return True


def _same_filesystem(files: list[Path], folder: Path) -> bool:
    folder.mkdir(parents=True, exist_ok=True)
    return all(os.stat(f).st_dev == os.stat(folder).st_dev for f in files)


def _link(source: Path, target: Path) -> None:
    """A hard link (no bytes written), or a copy where the filesystem refuses links."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def frozen_backbone_files(
    model: SequenceClassifier, base_folder: str | os.PathLike[str], out: Path
) -> list[Path]:
    """Files on ``out``'s filesystem that hold the frozen backbone of ``model``: the base folder's
    own when they qualify, else ``out/backbone`` (reused when it qualifies; else copied from the
    base, or written from the model, once)."""
    try:
        base = [f.resolve() for f in weight_files(base_folder)]
    except (FileNotFoundError, ValueError):
        base = []
    base_ok = bool(base) and _holds_backbone(model, base)
    if base_ok and _same_filesystem(base, out):
        return base
    store = out / BACKBONE_STORE
    if store.is_dir():
        try:
            files = weight_files(store)
        except (FileNotFoundError, ValueError):
            files = []
        if files and _holds_backbone(model, files):
            return files

    def fill(tmp: Path) -> None:
        if base_ok:  # another filesystem: copy the base's files once
            index = {}
            for i, f in enumerate(base, 1):
                name = f"backbone-{i:05d}.safetensors"
                shutil.copy2(f, tmp / name)
                index.update(dict.fromkeys(read_safetensors_header(tmp / name), name))
        else:  # the base's files hold more than the backbone: write its tensors once
            tensors = {n: p.detach().cpu().contiguous() for n, p in _expected(model).items()}
            save_file(tensors, str(tmp / "backbone-00001.safetensors"), metadata={"format": "pt"})
            index = dict.fromkeys(tensors, "backbone-00001.safetensors")
        (tmp / _INDEX).write_text(
            json.dumps({"metadata": {}, "weight_map": index}, indent=1), encoding="utf-8"
        )

    atomic_folder(store, fill)
    files = weight_files(store)
    if not _holds_backbone(model, files):
        raise RuntimeError(f"{store}: the backbone written there does not read back as the model's")
    return files


def save_linked_head(
    model: SequenceClassifier,
    folder: str | os.PathLike[str],
    backbone: list[Path],
    seals: list[dict[str, Any]] | None = None,
) -> Path:
    """Write ``model`` as a head folder whose backbone tensors are hard links to ``backbone``
    (files holding exactly the model's frozen backbone) and whose ``score`` is its own file;
    atomic, and checked by reading the new folder's tensor names and shapes back. The links are
    sealed (:mod:`hexamer.finetune.backbone_seal`; ``seals``: the backbone files'
    :func:`file_seal`, computed here when not given)."""
    expected = {**_expected(model), "score.weight": model.score.weight}
    seals = seals if seals is not None else [file_seal(f) for f in backbone]

    def fill(tmp: Path) -> None:
        write_head_files(model, tmp, model.score.weight.dtype)
        weight_map: dict[str, str] = {}
        sealed: dict[str, dict[str, Any]] = {}
        for i, source in enumerate(backbone, 1):
            name = f"backbone-{i:05d}.safetensors"
            _link(source, tmp / name)
            sealed[name] = seals[i - 1]
            weight_map.update(
                {t: name for t in read_safetensors_header(tmp / name) if not t.endswith(_SKIPPED)}
            )
        score = model.score.weight.detach().to("cpu").contiguous()
        save_file({"score.weight": score}, str(tmp / _SCORE), metadata={"format": "pt"})
        weight_map["score.weight"] = _SCORE
        total = sum(os.path.getsize(tmp / f) for f in set(weight_map.values()))
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        (tmp / _INDEX).write_text(json.dumps(index, indent=1) + "\n", encoding="utf-8")
        write_backbone_seal(tmp, sealed)
        _check_folder(tmp, expected)

    return atomic_folder(Path(folder), fill)


def _check_folder(folder: Path, expected: dict[str, torch.Tensor]) -> None:
    found: dict[str, tuple[int, ...]] = {}
    for file in weight_files(folder):
        for name, stored in read_safetensors_header(file).items():
            if not name.endswith(_SKIPPED):
                found[name] = tuple(stored.shape)
    want = {n: tuple(p.shape) for n, p in expected.items()}
    if found != want:
        wrong = sorted(set(found) ^ set(want) | {n for n in set(found) & set(want) if found[n] != want[n]})
        raise RuntimeError(f"{folder}: the head folder does not read back as written ({wrong[:3]})")


class BestWriter:
    """Writes a run's best checkpoint as the method allows (see the module text): :meth:`save` at
    each improvement, :meth:`finish` once when the run ends."""

    def __init__(
        self, model: SequenceClassifier, out: Path, options: FitOptions, base_folder: str | os.PathLike[str]
    ) -> None:
        self.model, self.out, self.options, self.base_folder = model, Path(out), options, base_folder
        self._backbone: list[Path] | None = None
        self._seals: list[dict[str, Any]] | None = None

    def save(self) -> None:
        method = self.options.method
        if method == "lora":  # the merged folder is written once, by finish()
            save_adapter(self.model, self.out / BEST_ADAPTER_DIR, base_model=str(self.base_folder))
        elif method == "probe":
            if self._backbone is None:
                self._backbone = frozen_backbone_files(self.model, self.base_folder, self.out)
                self._seals = [file_seal(f) for f in self._backbone]  # once: the files do not change
            save_linked_head(self.model, self.out / BEST_DIR, self._backbone, self._seals)
        else:
            save_classifier(self.model, self.out / BEST_DIR)

    def finish(self) -> None:
        """LoRA: put the best adapter back and write it merged as the plain head folder (the
        model's adapters hold the best ones afterwards)."""
        if self.options.method != "lora":
            return
        load_adapter_weights(self.model, self.out / BEST_ADAPTER_DIR)
        with lora_merged(self.model):
            save_classifier(self.model, self.out / BEST_DIR)
