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
from hexamer.train.copy_circuit import CircuitFreeze
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
from hexamer.train.init import StartingPoint, check_copy_circuit_shape, parameter_count, starting_point
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


@dataclass
class _Session:
    """One invocation's training state: data, model, optimizer, the step range still to run, and
    what has been recorded (the saved run's records first when resuming)."""

    config: TrainConfig
    device: torch.device
    bf16: bool
    run_dir: Path
    corpus: Corpus
    sampler: WindowSampler
    start: StartingPoint
    model: Any
    optimizer: torch.optim.Optimizer
    pad_id: int
    val_windows: list[tuple[str, str]]
    first_step: int
    last_step: int
    history: list[dict[str, Any]]
    validation: list[dict[str, Any]]
    autocast: Any = field(default_factory=contextlib.nullcontext)
    freeze: CircuitFreeze | None = None  # --copy-circuit: the planted weights stay as planted
    loss_value: float = math.nan
    train_time: float = 0.0
    bases_done: int = 0

    @property
    def speed(self) -> float:
        """Bases per second of this invocation's optimizer steps."""
        return self.bases_done / max(self.train_time, 1e-9)

    def state_dict(self) -> dict[str, Any]:
        return {"config": self.config.to_dict(), "history": self.history, "validation": self.validation}

    def validate(self, step: int) -> EvalResult | None:
        """Evaluate on the held-out windows (if any) and record the result at ``step``."""
        if not self.val_windows:
            return None
        self.model.eval()
        res = evaluate_model(
            self.model,
            self.start.tokenizer,
            self.val_windows,
            batch_size=self.config.eval_batch_size,
            device=self.device,
            bf16=self.bf16,
        )
        self.model.train()
        self.validation.append(
            {
                "step": step,
                "val_accuracy": res.accuracy,
                "val_bp_loss": res.bp_loss,
                "val_bases": res.n_bases,
                "val_accuracy_by_position": res.accuracy_by_position,
            }
        )
        return res

    def checkpoint(self, step: int) -> Path:
        """Write the checkpoint of ``step`` and drop the ones beyond ``keep_checkpoints``."""
        path = write_checkpoint(
            self.run_dir,
            step,
            self.model,
            self.optimizer,
            self.start.hf_config,
            self.start.tokenizer,
            self.state_dict(),
        )
        prune_checkpoints(self.run_dir, self.config.keep_checkpoints)
        return path


def _model_overrides(config: TrainConfig) -> dict[str, Any]:
    """The shape options a new model is built with (``None``: the init's own value)."""
    return {
        "hidden_size": config.hidden_size,
        "intermediate_size": config.intermediate_size,
        "num_layers": config.num_layers,
        "num_heads": config.num_heads,
        "num_kv_heads": config.num_kv_heads,
        "context_length": config.context_length,
        "rope_theta": config.rope_theta,
        "tie_embeddings": config.tie_embeddings,
    }


def _check_window_fits(config: TrainConfig, start: StartingPoint) -> None:
    """A training window, with its tags, must fit the model's context."""
    tokenizer, layout = start.tokenizer, start.tokenizer.layout
    all_tags = {config.tag, *config.file_tags.values()}
    need = tokens_per_window(tokenizer, config.window_bp, sorted(all_tags))
    context = start.model.config.max_position_embeddings
    if need > context:
        raise ValueError(
            f"a window of {config.window_bp} bp is {need} tokens with its tags, more than the model's "
            f"context of {context}; lower --window-bp to at most {(context - need + -(-config.window_bp // layout.k)) * layout.k}"
        )


def _open_session(config: TrainConfig) -> _Session:
    """Load the data and the starting model, restore a checkpoint when resuming, and check that
    there is work left, all before the run folder is written."""
    device = _device(config)
    bf16 = _use_bf16(config, device)
    resume_from = _resume_source(config)
    if config.copy_circuit:  # before the data is read
        check_copy_circuit_shape(config.init, _model_overrides(config))
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
    start = starting_point(
        config.init,
        bpe=config.bpe,
        seed=config.seed,
        overrides=_model_overrides(config),
        kmer_init=config.kmer_init,
        copy_circuit=config.copy_circuit,
    )
    _check_window_fits(config, start)
    tokenizer = start.tokenizer
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.layout.end_id
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
    session = _Session(
        config=config,
        device=device,
        bf16=bf16,
        run_dir=Path(config.output_dir),
        corpus=corpus,
        sampler=sampler,
        start=start,
        model=model,
        optimizer=optimizer,
        pad_id=pad_id,
        val_windows=val_windows,
        first_step=first_step,
        last_step=last_step,
        history=history,
        validation=validation,
    )
    if config.copy_circuit:  # after a resume, so the checkpoint's values are the ones kept
        session.freeze = CircuitFreeze(model)
    if bf16:
        session.autocast = torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return session


def _optimizer_step(s: _Session, step: int) -> dict[str, Any]:
    """One optimizer step (``grad_accum`` micro-batches, clipped, AdamW); returns its record."""
    config, layout = s.config, s.start.tokenizer.layout
    t0 = time.perf_counter()
    w = fns_weight_at(config, step)
    lr = lr_at(config, step)
    for group in s.optimizer.param_groups:
        group["lr"] = lr
    micro = list(_step_batches(config, s.sampler, s.start, step, s.pad_id))
    n_tokens = sum(b.n_full_tokens for b in micro)
    n_bases = sum(b.n_bases for b in micro)
    s.optimizer.zero_grad(set_to_none=True)
    ce_sum = fns_sum = 0.0
    for batch in micro:
        with s.autocast:
            parts = batch_loss(
                s.model,
                batch.to(s.device),
                kmer_start=layout.kmer_start,
                fns_weight=w,
                token_norm=n_tokens,
                base_norm=n_bases,
                k=layout.k,
            )
        parts.loss.backward()
        ce_sum += parts.ce_sum
        fns_sum += parts.fns_sum
    if s.freeze is not None:
        s.freeze.zero_grads()
    grad_norm = (
        float(torch.nn.utils.clip_grad_norm_(s.model.parameters(), config.max_grad_norm))
        if config.max_grad_norm > 0
        else math.nan
    )
    s.optimizer.step()
    if s.freeze is not None:
        s.freeze.restore()
    ce = ce_sum / max(n_tokens, 1) if w < 1 else math.nan
    fns = fns_sum / max(n_bases, 1) if w > 0 else math.nan
    s.loss_value = (0.0 if w == 1 else (1 - w) * ce) + (0.0 if w == 0 else w * fns)
    if not math.isfinite(s.loss_value):
        raise FloatingPointError(f"step {step + 1}: loss is {s.loss_value}; lower --lr")
    s.train_time += time.perf_counter() - t0
    s.bases_done += n_bases
    return {
        "step": step + 1,
        "loss": s.loss_value,
        "ce": ce,
        "fns": fns,
        "fns_weight": w,
        "lr": lr,
        "grad_norm": grad_norm,
        "bases_per_s": s.speed,
    }


def _after_step(
    s: _Session, rep: _Reporter, record: dict[str, Any], on_step: Callable[[dict[str, Any]], None] | None
) -> None:
    """Log the step, show it, and validate or checkpoint when the schedule says (the last step's
    are left to :func:`_finish`)."""
    config, done, w = s.config, record["step"], record["fns_weight"]
    if done % config.log_every == 0 or done == s.last_step:
        s.history.append(
            {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in record.items()}
        )
    if on_step is not None:
        on_step(record)
    rep.update(
        completed=done,
        loss=f"{s.loss_value:.4f}",
        stage="FNS" if w == 1 else "CE" if w == 0 else f"mix w={w:g}",
        lr=f"{record['lr']:.2e}",
        speed=f"{s.speed:,.0f}",
    )
    if config.eval_every and done % config.eval_every == 0 and done != s.last_step:
        res = s.validate(done)
        if res is not None:
            rep.update(val=f"val acc {res.accuracy:.4f}")
    if config.save_every and done % config.save_every == 0 and done != s.last_step:
        s.checkpoint(done)
        _write_metrics(s.run_dir, s.history, s.validation)


def _finish(s: _Session, rep: _Reporter) -> tuple[Path, Path | None]:
    """Validate, checkpoint and (when the schedule is complete) write the final model folder:
    ``(checkpoint, final folder or None)``."""
    done = s.last_step
    res = s.validate(done)
    if res is not None:
        rep.update(val=f"val acc {res.accuracy:.4f}")
        rep.print(
            f"held-out: accuracy {res.accuracy:.4f} (per position "
            f"{', '.join(f'{a:.3f}' for a in res.accuracy_by_position)}), bp loss {res.bp_loss:.4f}"
        )
    checkpoint = s.checkpoint(done)
    final_dir = None
    if done == s.config.steps:
        final_dir = write_model_folder(
            s.run_dir / FINAL_DIR, s.model, s.start.hf_config, s.start.tokenizer, dtype=s.config.save_dtype
        )
    _write_metrics(s.run_dir, s.history, s.validation)
    return checkpoint, final_dir


def _train(
    config: TrainConfig,
    *,
    progress: bool,
    console: Console | None,
    on_step: Callable[[dict[str, Any]], None] | None,
) -> TrainResult:
    s = _open_session(config)
    s.run_dir.mkdir(parents=True, exist_ok=True)
    config.to_json(s.run_dir / "train_config.json")
    with _Reporter(progress, s.last_step, s.first_step, console) as rep:
        rep.print(
            f"[dim]{parameter_count(s.model):,} parameters on {s.device}{' (bf16 autocast)' if s.bf16 else ''}; "
            f"{s.corpus.train_bp:,} bp train, {s.corpus.val_bp:,} bp held out "
            f"({len(s.val_windows)} validation windows)[/dim]"
        )
        if s.sampler.skipped:
            rep.print(
                f"[yellow]skipped {len(s.sampler.skipped)} sequence(s) shorter than the window[/yellow]"
            )
        for step in range(s.first_step, s.last_step):
            _after_step(s, rep, _optimizer_step(s, step), on_step)
        checkpoint, final_dir = _finish(s, rep)
    return TrainResult(
        output_dir=s.run_dir,
        step=s.last_step,
        final_loss=s.loss_value,
        checkpoint=checkpoint,
        final_dir=final_dir,
        history=s.history,
        validation=s.validation,
        train_seconds=s.train_time,
        bases_per_second=s.speed,
        n_parameters=parameter_count(s.model),
        skipped_sequences=list(s.sampler.skipped),
    )
