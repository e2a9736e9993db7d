"""One timed case of ``hexamer bench finetune``, run in a fresh process so its peak memory is its own.

``python -m hexamer.bench.finetune_cases SPEC.json RESULT.json`` loads the model, runs the case's
warm-up steps untimed, then its timed steps, and writes (atomically) the seconds of each timed
step and the process's RSS high-water mark (``VmHWM`` of ``/proc/self/status``; ``ru_maxrss``
where there is no ``/proc``). Model loading, tokenizer set-up and the first steps (optimizer state
allocation, first-call costs) are outside the timed steps on both sides.

Cases (``spec["case"]``):

* ``hexamer`` — :func:`hexamer.finetune.fit.fit` itself (``method`` full or lora), each step's end
  stamped by its ``on_progress`` callback; the run is stopped from that callback after the last
  timed step, before the final checkpoint is written (so no save is timed).
* ``transformers`` — ``transformers.Trainer.train()`` on ``AutoModelForSequenceClassification``
  (``peft.get_peft_model`` for LoRA) with the Trainer's default optimizer, step ends stamped by a
  ``TrainerCallback`` (``on_step_end``), stopped the same way. The same token ids are fed
  (tokenized once beforehand, as the official recipes map their dataset).
* ``probe`` — the probe path of ``fit``: its :class:`~hexamer.finetune.fit_loop.Trainer` built on a
  frozen backbone (the pooled features of every row computed once) and ``epochs`` epochs of head
  steps; one "step" here is the whole of that, divided by ``epochs`` (seconds per epoch).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["TARGET_NAMES", "bench_rows", "peak_rss_bytes", "run_case"]

#: the regression outputs of the Malinois MPRA task (log2 fold change per cell line)
TARGET_NAMES: tuple[str, ...] = ("K562", "HepG2", "SKNSH")


class _Stop(Exception):
    """Raised from a progress callback once the timed steps are done (the run stops there)."""


def peak_rss_bytes() -> int:
    """This process's resident-set high-water mark in bytes (``VmHWM``; ``ru_maxrss`` otherwise)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024


def bench_rows(n: int, length: int, seed: int = 0) -> tuple[list[str], np.ndarray]:
    """``n`` windows of ``length`` bp of real human DNA (the shipped chr20 slice, A/C/G/T only, as
    the Malinois MPRA oligos are) and standard-normal labels, one column per :data:`TARGET_NAMES`;
    random DNA where the slice runs out."""
    import gzip

    from hexamer.demo import demo_data_files

    path = next(p for p in demo_data_files() if p.name == "human_chr20.fa.gz")
    with gzip.open(path, "rt") as fh:
        text = "".join(line.strip() for line in fh if not line.startswith(">")).upper()
    rng = np.random.default_rng(seed)
    seqs: list[str] = []
    for start in range(0, len(text) - length + 1, length):
        window = text[start : start + length]
        if set(window) <= set("ACGT"):
            seqs.append(window)
        if len(seqs) == n:
            break
    while len(seqs) < n:
        seqs.append("".join(rng.choice(list("ACGT"), length)))
    labels = rng.standard_normal((n, len(TARGET_NAMES))).astype(np.float32)
    return seqs, labels


def _data(spec: dict[str, Any]) -> tuple[Any, Any]:
    from hexamer.finetune.task import LabelledSet, TaskSpec

    seqs, labels = bench_rows(spec["rows"], spec["length"], spec.get("seed", 0))
    task = TaskSpec("regression", TARGET_NAMES)
    rows = LabelledSet(tuple(f"row{i}" for i in range(len(seqs))), tuple(seqs), labels)
    return task, rows


def _options(spec: dict[str, Any], **changes: Any) -> Any:
    from hexamer.finetune.options import FitOptions, LoraOptions

    lora = LoraOptions(
        rank=spec["lora_rank"], alpha=2.0 * spec["lora_rank"], targets=tuple(spec["lora_targets"])
    )
    return FitOptions(
        batch_size=spec["batch_size"], lr=spec["lr"], seed=spec.get("seed", 0), lora=lora, **changes
    )


def _step_seconds(stamps: list[float], warmup: int) -> list[float]:
    """Durations of the steps after the ``warmup`` first, from the time stamps of each step's end."""
    return [b - a for a, b in zip(stamps[warmup - 1 :], stamps[warmup:], strict=False)]


def _hexamer_case(spec: dict[str, Any]) -> list[float]:
    from hexamer.finetune.fit import fit

    task, rows = _data(spec)
    warmup, steps = spec["warmup_steps"], spec["steps"]
    options = _options(spec, method=spec["method"], steps=warmup + steps + 1)
    stamps: list[float] = []

    def on_progress(progress: Any) -> None:
        stamps.append(time.perf_counter())
        if progress.step >= warmup + steps:
            raise _Stop

    with tempfile.TemporaryDirectory(prefix="hexamer-bench-finetune-") as tmp, contextlib.suppress(_Stop):
        fit(spec["folder"], rows, None, task, options, Path(tmp) / "run", on_progress=on_progress)
    return _step_seconds(stamps, warmup)


def _peer_model(spec: dict[str, Any], num_labels: int) -> Any:
    import torch
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    config = json.loads((Path(spec["folder"]) / "config.json").read_text())
    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        spec["folder"],
        num_labels=num_labels,
        problem_type="regression",
        pad_token_id=config.get("pad_token_id"),
        dtype=torch.float32,
    )
    if spec["method"] == "lora":
        import peft

        lora = peft.LoraConfig(
            task_type=peft.TaskType.SEQ_CLS,
            r=spec["lora_rank"],
            lora_alpha=2 * spec["lora_rank"],
            lora_dropout=0.0,
            target_modules=list(spec["lora_targets"]),
        )
        model = peft.get_peft_model(model, lora)
    return model


def _peer_case(spec: dict[str, Any]) -> list[float]:
    import torch
    import transformers

    from hexamer.tokenizer import CarbonTokenizer, encode_dna

    task, rows = _data(spec)
    layout = CarbonTokenizer.from_pretrained(spec["folder"]).layout
    dataset = []
    for seq, label in zip(rows.sequences, rows.labels, strict=True):
        ids = torch.tensor([layout.begin_id, *encode_dna(seq, layout).ids.tolist(), layout.end_id])
        dataset.append(
            {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": torch.tensor(label)}
        )
    model = _peer_model(spec, task.num_labels)
    warmup, steps = spec["warmup_steps"], spec["steps"]
    stamps: list[float] = []

    class Stamp(transformers.TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            stamps.append(time.perf_counter())
            if state.global_step >= warmup + steps:
                control.should_training_stop = True
            return control

    with tempfile.TemporaryDirectory(prefix="hexamer-bench-finetune-peer-") as tmp:
        args = transformers.TrainingArguments(
            output_dir=tmp,
            per_device_train_batch_size=spec["batch_size"],
            max_steps=warmup + steps + 1,
            learning_rate=spec["lr"],
            weight_decay=0.01,
            lr_scheduler_type="cosine",
            warmup_steps=0,
            max_grad_norm=1.0,
            logging_strategy="no",
            save_strategy="no",
            report_to=[],
            use_cpu=True,
            seed=spec.get("seed", 0),
            dataloader_num_workers=0,
            disable_tqdm=True,
        )
        trainer = transformers.Trainer(
            model=model,
            args=args,
            train_dataset=dataset,
            data_collator=transformers.default_data_collator,
            callbacks=[Stamp()],
        )
        trainer.train()
    return _step_seconds(stamps, warmup)


def _probe_case(spec: dict[str, Any]) -> list[float]:
    from hexamer.finetune.fit_loop import Trainer
    from hexamer.finetune.folders import new_classifier
    from hexamer.finetune.head import HeadSettings
    from hexamer.finetune.predict import pooled_features
    from hexamer.model.checkpoint import read_folder_config

    task, rows = _data(spec)
    options = _options(spec, method="probe", epochs=spec["epochs"])
    model = new_classifier(spec["folder"], HeadSettings(task), seed=options.seed)
    # the learning rates fit() would use: the defaults for the model's size where not given
    options = options.resolved(read_folder_config(spec["folder"])[1].hidden_size)
    for p in model.backbone.parameters():
        p.requires_grad_(False)
    pooled_features(model, rows.sequences[: options.batch_size], batch_size=options.batch_size)  # warm-up
    seconds = []
    for _ in range(spec["steps"]):  # each "step": features once + `epochs` epochs of the head
        start = time.perf_counter()
        trainer = Trainer(model, rows, None, task, options, "mse", None, False)
        while trainer.step < trainer.total_steps:
            trainer.train_step()
        seconds.append((time.perf_counter() - start) / spec["epochs"])
    return seconds


CASES = {"hexamer": _hexamer_case, "transformers": _peer_case, "probe": _probe_case}


def run_case(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one case (after setting torch's threads) and return its step seconds and peak RSS."""
    import torch

    if spec.get("threads"):
        torch.set_num_threads(int(spec["threads"]))
    seconds = CASES[spec["case"]](spec)
    if len(seconds) < 1:
        raise RuntimeError(f"case {spec['case']} ended before its timed steps ({len(seconds)} timed)")
    return {"step_seconds": seconds, "peak_rss_bytes": peak_rss_bytes(), "threads": torch.get_num_threads()}


def main(argv: list[str]) -> int:
    spec_path, result_path = Path(argv[0]), Path(argv[1])
    result = run_case(json.loads(spec_path.read_text()))
    tmp = result_path.with_name(result_path.name + ".tmp")
    tmp.write_text(json.dumps(result))
    os.replace(tmp, result_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
