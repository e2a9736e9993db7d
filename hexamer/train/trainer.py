"""``train(config)``: the training loop that ties data, objective, schedule and checkpoints together.

One optimizer step = ``grad_accum`` micro-batches of ``batch_size`` random windows, each a pure
function of ``(seed, step, micro)``; losses are normalised over the whole step; the gradient is
clipped; AdamW steps at the learning rate the schedule gives for that step. Checkpoints every
``save_every`` steps (and at the end or at ``stop_at``) carry everything a resumed run needs, so
``N`` steps in one go and ``N/2 + N/2`` with ``resume`` give the same model.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from rich.console import Console

from hexamer.progress import progress_bar
from hexamer.train.checkpoint import (
    list_checkpoints,
    load_training_state,
    prune_checkpoints,
    write_checkpoint,
    write_model_folder,
)
from hexamer.train.config import RESUME_KEYS, TrainConfig
from hexamer.train.data import (
    Corpus,
    WindowSampler,
    build_example,
    collate,
    load_corpus,
    step_rng,
    tokens_per_window,
    validation_windows,
)
from hexamer.train.evaluate import EvalResult, evaluate_model
from hexamer.train.init import StartingPoint, parameter_count, starting_point
from hexamer.train.objective import batch_loss
from hexamer.train.schedule import build_optimizer, fns_weight_at, lr_at

__all__ = ["TrainResult", "train"]

FINAL_DIR = "final"
METRICS_FILE = "metrics.jsonl"


@dataclass
class TrainResult:
    """What a run did. ``final_dir`` is set once the schedule is complete (not after ``stop_at``)."""

    output_dir: Path
    step: int  # optimizer steps done in total (resumed ones included)
    final_loss: float  # objective of the last step
    checkpoint: Path | None
    final_dir: Path | None
    history: list[dict[str, Any]] = field(default_factory=list)
    validation: list[dict[str, Any]] = field(default_factory=list)
    train_seconds: float = 0.0  # this invocation only
    bases_per_second: float = 0.0
    n_parameters: int = 0
    skipped_sequences: list[str] = field(default_factory=list)

    @property
    def last_validation(self) -> dict[str, Any] | None:
        return self.validation[-1] if self.validation else None


def _device(config: TrainConfig) -> torch.device:
    if config.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(config.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device cuda requested but no CUDA device is available")
    return device


def _use_bf16(config: TrainConfig, device: torch.device) -> bool:
    if config.precision == "auto":
        return device.type == "cuda"
    return config.precision == "bf16"


def _resume_source(config: TrainConfig) -> Path | None:
    if config.resume_from:
        path = Path(config.resume_from)
        if not path.is_dir():
            raise FileNotFoundError(f"checkpoint to resume not found: {path}")
        return path
    if config.resume:
        found = list_checkpoints(config.output_dir)
        if not found:
            raise FileNotFoundError(f"--resume: no checkpoint-* folder in {config.output_dir}")
        return found[-1]
    return None


def _check_same_run(config: TrainConfig, saved: dict[str, Any], folder: Path) -> None:
    """A resumed run must follow the saved trajectory: same data, model, schedule and seed."""
    diffs = [k for k in RESUME_KEYS if k in saved and saved[k] != getattr(config, k)]
    if diffs:
        shown = ", ".join(f"{k} (checkpoint {saved[k]!r}, now {getattr(config, k)!r})" for k in diffs[:4])
        raise ValueError(f"cannot resume {folder}: the run's options differ: {shown}")


class _Reporter:
    """Rich progress bar (or nothing) showing step, loss, learning rate and bases/s."""

    def __init__(self, enabled: bool, total: int, start: int, console: Console | None) -> None:
        self.progress = progress_bar(
            "[bold]train[/bold]",
            "loss {task.fields[loss]}",
            "{task.fields[stage]}",
            "lr {task.fields[lr]}",
            "{task.fields[speed]} bp/s",
            "{task.fields[val]}",
            console=console,
            disable=not enabled,
        )
        self.task = self.progress.add_task(
            "train", total=total, completed=start, loss="-", stage="", lr="-", speed="-", val=""
        )

    def __enter__(self) -> _Reporter:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)

    def update(self, **fields: Any) -> None:
        self.progress.update(self.task, **fields)

    def print(self, text: str) -> None:
        if not self.progress.disable:
            self.progress.console.print(text)


def _write_metrics(run_dir: Path, history: list[dict[str, Any]], validation: list[dict[str, Any]]) -> None:
    rows = sorted([*history, *validation], key=lambda r: (r["step"], "val_accuracy" in r))
    tmp = run_dir / f".{METRICS_FILE}.tmp"
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    tmp.replace(run_dir / METRICS_FILE)
    try:  # the curves beside the numbers; matplotlib is the optional extra 'plots'
        from hexamer.train.curves import plot_training_curves

        plot_training_curves(run_dir / METRICS_FILE, title=run_dir.name)
    except ImportError:
        pass


def _step_batches(
    config: TrainConfig, sampler: WindowSampler, start: StartingPoint, step: int, pad_id: int
) -> Iterator[Any]:
    for micro in range(config.grad_accum):
        windows = sampler.sample(step_rng(config.seed, step, micro), config.batch_size)
        yield collate([build_example(start.tokenizer, bases, tag) for tag, bases in windows], pad_id)


def train(
    config: TrainConfig,
    *,
    progress: bool = True,
    console: Console | None = None,
    on_step: Callable[[dict[str, Any]], None] | None = None,
) -> TrainResult:
    """Run (or resume) the training described by ``config``; returns what happened.

    Raises ``ValueError``/``FileNotFoundError`` with a clear message for bad input (no data, empty
    files, sequences shorter than the window, an unknown init, a window longer than the context,
    a resume whose options differ from the checkpoint's).
    """
    config.validate()
    threads = torch.get_num_threads()
    if config.threads:
        torch.set_num_threads(config.threads)
    try:
        return _train(config, progress=progress, console=console, on_step=on_step)
    finally:
        torch.set_num_threads(threads)


def _train(
    config: TrainConfig,
    *,
    progress: bool,
    console: Console | None,
    on_step: Callable[[dict[str, Any]], None] | None,
) -> TrainResult:
    device = _device(config)
    bf16 = _use_bf16(config, device)
    run_dir = Path(config.output_dir)
    resume_from = _resume_source(config)

    corpus: Corpus = load_corpus(
        config.data,
        val_data=config.val_data,
        val_fraction=config.val_fraction,
        tag=config.tag,
        file_tags=config.file_tags,
    )
    sampler = WindowSampler(
        corpus.train, config.window_bp, rc_prob=config.rc_prob, tag_dropout=config.tag_dropout
    )
    overrides = {
        "hidden_size": config.hidden_size,
        "intermediate_size": config.intermediate_size,
        "num_layers": config.num_layers,
        "num_heads": config.num_heads,
        "num_kv_heads": config.num_kv_heads,
        "context_length": config.context_length,
        "rope_theta": config.rope_theta,
        "tie_embeddings": config.tie_embeddings,
    }
    start = starting_point(
        config.init, bpe=config.bpe, seed=config.seed, overrides=overrides, kmer_init=config.kmer_init
    )
    tokenizer, layout = start.tokenizer, start.tokenizer.layout
    all_tags = {config.tag, *config.file_tags.values()}
    need = tokens_per_window(tokenizer, config.window_bp, sorted(all_tags))
    context = start.model.config.max_position_embeddings
    if need > context:
        raise ValueError(
            f"a window of {config.window_bp} bp is {need} tokens with its tags, more than the model's "
            f"context of {context}; lower --window-bp to at most {(context - need + -(-config.window_bp // layout.k)) * layout.k}"
        )
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else layout.end_id
    val_windows = validation_windows(corpus.val, config.window_bp, config.val_max_bp)

    model = start.model.to(device)
    model.train()
    optimizer = build_optimizer(model, config)
    first_step = 0
    history: list[dict[str, Any]] = []
    validation: list[dict[str, Any]] = []
    if resume_from is not None:
        saved = json.loads((resume_from / "trainer_state.json").read_text(encoding="utf-8"))
        _check_same_run(config, saved.get("config", {}), resume_from)
        state = load_training_state(resume_from, model, optimizer)
        first_step = int(state["step"])
        history = list(state.get("history", []))
        validation = list(state.get("validation", []))
    last_step = config.stop_at or config.steps
    if first_step >= last_step:
        raise ValueError(f"nothing to do: the run is already at step {first_step} (target {last_step})")

    run_dir.mkdir(parents=True, exist_ok=True)
    config.to_json(run_dir / "train_config.json")
    autocast = (
        torch.autocast(device_type=device.type, dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
    )

    def state_dict() -> dict[str, Any]:
        return {"config": config.to_dict(), "history": history, "validation": validation}

    def validate(step: int) -> EvalResult | None:
        if not val_windows:
            return None
        model.eval()
        res = evaluate_model(
            model, tokenizer, val_windows, batch_size=config.eval_batch_size, device=device, bf16=bf16
        )
        model.train()
        validation.append(
            {
                "step": step,
                "val_accuracy": res.accuracy,
                "val_bp_loss": res.bp_loss,
                "val_bases": res.n_bases,
                "val_accuracy_by_position": res.accuracy_by_position,
            }
        )
        return res

    last_ckpt: Path | None = None
    final_dir: Path | None = None
    loss_value = math.nan
    train_time = 0.0
    bases_done = 0
    with _Reporter(progress, last_step, first_step, console) as rep:
        rep.print(
            f"[dim]{parameter_count(model):,} parameters on {device}{' (bf16 autocast)' if bf16 else ''}; "
            f"{corpus.train_bp:,} bp train, {corpus.val_bp:,} bp held out "
            f"({len(val_windows)} validation windows)[/dim]"
        )
        if sampler.skipped:
            rep.print(f"[yellow]skipped {len(sampler.skipped)} sequence(s) shorter than the window[/yellow]")
        for step in range(first_step, last_step):
            t0 = time.perf_counter()
            w = fns_weight_at(config, step)
            lr = lr_at(config, step)
            for group in optimizer.param_groups:
                group["lr"] = lr
            micro = list(_step_batches(config, sampler, start, step, pad_id))
            n_tokens = sum(b.n_full_tokens for b in micro)
            n_bases = sum(b.n_bases for b in micro)
            optimizer.zero_grad(set_to_none=True)
            ce_sum = fns_sum = 0.0
            for batch in micro:
                with autocast:
                    parts = batch_loss(
                        model,
                        batch.to(device),
                        kmer_start=layout.kmer_start,
                        fns_weight=w,
                        token_norm=n_tokens,
                        base_norm=n_bases,
                        k=layout.k,
                    )
                parts.loss.backward()
                ce_sum += parts.ce_sum
                fns_sum += parts.fns_sum
            grad_norm = (
                float(torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm))
                if config.max_grad_norm > 0
                else math.nan
            )
            optimizer.step()
            ce = ce_sum / max(n_tokens, 1) if w < 1 else math.nan
            fns = fns_sum / max(n_bases, 1) if w > 0 else math.nan
            loss_value = (0.0 if w == 1 else (1 - w) * ce) + (0.0 if w == 0 else w * fns)
            if not math.isfinite(loss_value):
                raise FloatingPointError(f"step {step + 1}: loss is {loss_value}; lower --lr")
            elapsed = time.perf_counter() - t0
            train_time += elapsed
            bases_done += n_bases
            done = step + 1
            speed = bases_done / max(train_time, 1e-9)
            record = {
                "step": done,
                "loss": loss_value,
                "ce": ce,
                "fns": fns,
                "fns_weight": w,
                "lr": lr,
                "grad_norm": grad_norm,
                "bases_per_s": speed,
            }
            if done % config.log_every == 0 or done == last_step:
                history.append(
                    {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in record.items()}
                )
            if on_step is not None:
                on_step(record)
            rep.update(
                completed=done,
                loss=f"{loss_value:.4f}",
                stage="FNS" if w == 1 else "CE" if w == 0 else f"mix w={w:g}",
                lr=f"{lr:.2e}",
                speed=f"{speed:,.0f}",
            )
            if config.eval_every and done % config.eval_every == 0 and done != last_step:
                res = validate(done)
                if res is not None:
                    rep.update(val=f"val acc {res.accuracy:.4f}")
            if config.save_every and done % config.save_every == 0 and done != last_step:
                last_ckpt = write_checkpoint(
                    run_dir, done, model, optimizer, start.hf_config, tokenizer, state_dict()
                )
                prune_checkpoints(run_dir, config.keep_checkpoints)
                _write_metrics(run_dir, history, validation)

        done = last_step
        res = validate(done)
        if res is not None:
            rep.update(val=f"val acc {res.accuracy:.4f}")
            rep.print(
                f"held-out: accuracy {res.accuracy:.4f} (per position "
                f"{', '.join(f'{a:.3f}' for a in res.accuracy_by_position)}), bp loss {res.bp_loss:.4f}"
            )
        last_ckpt = write_checkpoint(
            run_dir, done, model, optimizer, start.hf_config, tokenizer, state_dict()
        )
        prune_checkpoints(run_dir, config.keep_checkpoints)
        if done == config.steps:
            final_dir = write_model_folder(
                run_dir / FINAL_DIR, model, start.hf_config, tokenizer, dtype=config.save_dtype
            )
        _write_metrics(run_dir, history, validation)

    return TrainResult(
        output_dir=run_dir,
        step=last_step,
        final_loss=loss_value,
        checkpoint=last_ckpt,
        final_dir=final_dir,
        history=history,
        validation=validation,
        train_seconds=train_time,
        bases_per_second=bases_done / max(train_time, 1e-9),
        n_parameters=parameter_count(model),
        skipped_sequences=list(sampler.skipped),
    )
