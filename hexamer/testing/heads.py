"""Head folders for tests: the tiny random Carbon model with a random score head, saved as
``hexamer finetune`` saves one (no training)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hexamer.synthetic import build_carbon_folder_once

__all__ = ["build_head_folder"]


def build_head_folder(
    out: str | os.PathLike[str],
    *,
    kind: str = "regression",
    targets: tuple[str, ...] = ("activity",),
    classes: tuple[str, ...] | None = None,
    max_length: int | None = 60,
    rc_average: bool = False,
    zscore: tuple[tuple[float, ...], tuple[float, ...]] | None = ((1.5,), (2.0,)),
    seed: int = 3,
    **shape: Any,
) -> Path:
    """A head folder at ``out`` on the tiny model (built beside it): ``kind`` regression on
    ``targets`` (z-scored with ``zscore`` = (means, s.d.)), or classification with ``classes``.
    ``max_length`` is the training length the folder records; the score head is random (``seed``)."""
    from hexamer.finetune.folders import new_classifier, save_classifier
    from hexamer.finetune.head import HeadSettings
    from hexamer.finetune.task import TaskSpec
    from hexamer.finetune.transform import LabelTransform

    folder = Path(out)
    base = build_carbon_folder_once(folder.parent / f".{folder.name}-base", **shape)
    if kind == "regression":
        task = TaskSpec("regression", targets)
        if zscore is None:
            transform = LabelTransform("identity", targets)
        else:
            transform = LabelTransform("zscore", targets, *zscore)
    else:
        names = classes or ("neg", "pos")
        columns = targets if kind == "multilabel" else ("label",)
        task = TaskSpec(kind, columns, names)  # type: ignore[arg-type]
        transform = LabelTransform("identity", task.output_names)
    settings = HeadSettings(
        task, label_transform=transform.to_json(), max_length=max_length, rc_average=rc_average
    )
    model = new_classifier(base, settings, seed=seed)
    return save_classifier(model, folder)
