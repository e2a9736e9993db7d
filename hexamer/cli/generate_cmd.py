"""``hexamer generate``: continue each prompt of a sequence file (or the command line), ``--n``
samples each, optionally with a draft model or on Ray actors; FASTA keeps the good records, a
table every one. The job itself is :func:`hexamer.generation_job.run_generation` (on Ray:
:func:`hexamer.distributed.generate`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from hexamer.cli import server_options as served
from hexamer.cli.app import (
    DTypeOption,
    JsonFlag,
    app,
    console,
    describe_counts,
    err_console,
    fail,
    print_json,
    resolve_model,
)
from hexamer.cli.checks import (
    MAX_BATCH_SIZE,
    SEED_MAX_CLI,
    PrefixOption,
    check_choice,
    check_output,
    check_runtime,
    is_stdio,
)
from hexamer.cli.option_groups import FILLED, option_group
from hexamer.cli.ray_options import RayRun, check_resume, ray_options
from hexamer.cli.scaleout import ResumeOption
from hexamer.cli.sequence_jobs import (
    count_records,
    fail_if_none_ok,
    job_progress,
    load_carbon,
    read_job_records,
    report_skipped,
)
from hexamer.generation_job import MAX_SAMPLES
from hexamer.job_output import check_sequence_output, is_fasta_name
from hexamer.validate import SEED_MIN

if TYPE_CHECKING:
    from hexamer.carbon import Carbon
    from hexamer.generation_job import GenerationResult, GenerationSettings


def _generation_settings(**options: Any) -> GenerationSettings:
    from hexamer.generation_job import GenerationSettings

    try:
        return GenerationSettings(**{**options, "stop": tuple(options["stop"] or ())})
    except ValueError as exc:  # the one value the option types cannot check
        raise typer.BadParameter(str(exc), param_hint="'--stop'") from exc


#: The options that decide the generated rows, handed to ``generate`` as one
#: :class:`~hexamer.generation_job.GenerationSettings` (the local and the ``--ray`` job take it whole).
generation_options = option_group(
    "settings",
    (
        ("max_bp", Annotated[int, typer.Option(min=1, help="New bases per prompt (exact).")], 1000),
        (
            "mode",
            Annotated[
                Literal["bp", "token"], typer.Option(help="bp (FNS, base by base) or token (whole 6-mers).")
            ],
            "bp",
        ),
        ("temperature", Annotated[float, typer.Option(min=0.0, help="0 = greedy.")], 1.0),
        (
            "top_p",
            Annotated[float, typer.Option(min=0.0, max=1.0, help="Nucleus filter (per base in bp mode).")],
            1.0,
        ),
        (
            "top_k",
            Annotated[int, typer.Option(min=0, help="Token mode: keep the k most likely 6-mers (0 = off).")],
            0,
        ),
        (
            "min_p",
            Annotated[
                float,
                typer.Option(
                    min=0.0, max=1.0, help="Token mode: keep 6-mers with >= min_p x the top probability."
                ),
            ],
            0.0,
        ),
        (
            "repetition_penalty",
            Annotated[
                float,
                typer.Option(min=0.0, help="Penalise 6-mers already in the prompt or output (1 = off)."),
            ],
            1.0,
        ),
        (
            "n",
            Annotated[
                int,
                typer.Option(
                    "--n",
                    min=1,
                    max=MAX_SAMPLES,
                    help="Samples per prompt: a sample column in tables, IDs ID_0, ID_1 ... in FASTA.",
                ),
            ],
            1,
        ),
        (
            "stop",
            Annotated[
                list[str] | None,
                typer.Option(
                    "--stop",
                    metavar="DNA",
                    help="Cut a sequence before this DNA string (repeatable; finish_reason stop).",
                ),
            ],
            None,
        ),
        (
            "logprobs",
            Annotated[
                bool,
                typer.Option(
                    "--logprobs/--no-logprobs",
                    help="Tables: a logprobs list column, the model's log-probability of each new base "
                    "(bp mode) or 6-mer (token mode).",
                ),
            ],
            False,
        ),
        (
            "seed",
            Annotated[
                int | None,
                typer.Option(
                    min=SEED_MIN,
                    max=SEED_MAX_CLI,
                    help="Sample j of record i uses seed + i * n + j (i: its index in the input).",
                ),
            ],
            None,
        ),
        (
            "mask",
            Annotated[str | None, typer.Option(help="IUPAC mask over the first new bases, e.g. NNNATGNNN.")],
            None,
        ),
        ("prefix", PrefixOption, ""),
    ),
    _generation_settings,
)

SamplerOption = Annotated[
    Literal["auto", "client", "server"],
    typer.Option(
        help="--server: where 6-mers are drawn. client: here, from the server's top-N (a --seed gives "
        "the local model's sequences); server: the server's own sampler (token mode, no --mask, "
        "prompts of whole 6-mers, vLLM or hexamer server); auto: the server's where it can.",
    ),
]


@app.command()
@served.server_options
@generation_options
@ray_options(
    Annotated[
        int | None,
        typer.Option(
            min=1, help="--ray: records per shard, a multiple of 256 // --n (default 16 times that)."
        ),
    ]
)
def generate(
    command: typer.Context,
    sequences: Annotated[
        list[str] | None, typer.Argument(help="Prompts (DNA, or text ending in an open <dna>).")
    ] = None,
    input_file: Annotated[
        Path | None, typer.Option("--input", "-i", help="FASTA/FASTQ/txt/TSV/CSV/Parquet of prompts.")
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help=".fa/.fasta(.gz), .tsv, .csv, .jsonl or .parquet; default (or -): FASTA on stdout.",
        ),
    ] = None,
    model: Annotated[str | None, typer.Option("--model", "-m", help="Model folder or hub id.")] = None,
    settings: GenerationSettings = FILLED,  # the generation options (generation_options)
    batch_size: Annotated[
        int, typer.Option(min=1, max=MAX_BATCH_SIZE, help="Sequences decoded together.")
    ] = 16,
    dtype: DTypeOption = "auto",
    device: Annotated[
        str | None, typer.Option(help="cpu, cuda, cuda:1 ... (default: cuda when present).")
    ] = None,
    draft: Annotated[
        str | None,
        typer.Option("--draft", help="Smaller model with the same tokenizer: speculative decoding."),
    ] = None,
    spec_k: Annotated[
        str, typer.Option("--spec-k", help="6-mers drafted per round: a number or auto.")
    ] = "auto",
    sampler: SamplerOption = "auto",
    ray: RayRun | None = None,  # the --ray options (ray_options)
    resume: ResumeOption = False,
    server: served.Server | None = None,  # the --server options (server_options)
    as_json: JsonFlag = False,
) -> None:
    """Continue DNA prompts with the model (exact base counts, bp or token level).

    Exits with status 1 (after writing the whole output) when no record is ok."""
    served.check_server_choice(server, model, ray, command)
    check_runtime(dtype=dtype, device=None if ray else device)  # --ray: the workers' device
    out = None if is_stdio(out) else out
    _check_options(settings, out, as_json, draft, spec_k, sampler, server, ray)
    check_resume(resume, ray)
    if ray is not None:
        from hexamer.cli.scaleout import generate_on_ray

        result = generate_on_ray(
            ray.pool(threads=None, dtype=dtype, device=device),
            sequences=sequences,
            input_file=input_file,
            out=out,
            model=resolve_model(model),
            shard_records=ray.shard_records,
            resume=resume,
            settings=settings,
            batch_size=batch_size,
        )
        return _report(result, settings.n, as_json)
    records = read_job_records(sequences or [], input_file)  # an unusable file stops us before the load
    carbon = served.open_model(server, model, dtype, device, batch_size, command)
    speculative = _speculative_options(carbon, draft, spec_k, dtype, device, batch_size)
    settings = replace(settings, sampler=None if server is None else sampler)
    _check_lengths(carbon, settings)
    from hexamer.generation_job import run_generation

    with job_progress("generating", count_records(sequences, input_file)) as bar:
        result = run_generation(
            carbon,
            records,
            out,
            settings,
            speculative=speculative,
            on_progress=bar.advance,
            on_bases=lambda n_bp: bar.count(n_bp, "bp"),
        )
    _report(result, settings.n, as_json)


def _check_options(
    settings: GenerationSettings,
    out: Path | None,
    as_json: bool,
    draft: str | None,
    spec_k: str,
    sampler: str,
    server: served.Server | None,
    ray: RayRun | None,
) -> None:
    """The usage errors of option combinations, before any file is read or model loaded."""
    check_choice("--mode", settings.mode, ("bp", "token"))
    _check_spec_k(spec_k)  # with or without --draft: a wrong value is wrong either way
    if as_json and out is None:
        raise typer.BadParameter("--json needs --out FILE: stdout carries the sequences")
    if out is not None:
        check_output("--out", out, check_sequence_output)
    if settings.logprobs and (out is None or is_fasta_name(out)):
        raise typer.BadParameter(
            "--logprobs needs a table output (-o .tsv, .csv, .jsonl or .parquet): FASTA has no column for them"
        )
    if draft is not None and settings.logprobs:
        raise typer.BadParameter("--draft takes no --logprobs")
    if draft is not None and settings.repetition_penalty != 1:
        raise typer.BadParameter("--draft takes no --repetition-penalty")
    if draft is not None and ray is not None:
        raise typer.BadParameter(
            "--draft decodes with two models in one process; --ray takes no --draft", param_hint="'--draft'"
        )
    if server is None and sampler != "auto":
        raise typer.BadParameter(
            "--sampler chooses where a served model samples: add --server", param_hint="'--sampler'"
        )
    if server is not None:
        _check_served_options(draft, settings.repetition_penalty)


def _check_lengths(carbon: Carbon, settings: GenerationSettings) -> None:
    """The length alone (against the context and the KV memory), then the options, before any
    prompt is read: an error here concerns every record."""
    try:
        carbon.check_generation_length(settings.max_bp, None)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="'--max-bp'") from exc
    try:
        carbon.check_prompt("<dna>", prefix=settings.prefix, **settings.checks())
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc


def _report(result: GenerationResult, n: int, as_json: bool) -> None:
    """The skipped records, the speculative totals and the summary (``--json``: one object); exit
    status 1 when no record is ok."""
    statuses = result.status_counts
    spec = result.spec_stats
    report_skipped(result.problems)
    if spec is not None:
        err_console.print(f"speculative decoding: {spec.summary()}")
    if as_json:
        print_json(
            {
                "output": str(result.output),
                "n_records": result.n_records,
                "status_counts": statuses,  # per input record (a record has n sample rows)
                "n_samples": n,
                "n_bp": result.written_bp,
                "speculative": None
                if spec is None
                else {
                    "acceptance_rate": spec.acceptance_rate,
                    "tokens_per_forward": spec.tokens_per_forward,
                    "mean_k": spec.mean_k,
                },
            }
        )
    elif result.output is not None:
        console.print(f"wrote {result.output} ({describe_counts(statuses)})")
    table = result.output is not None and not is_fasta_name(result.output)
    fail_if_none_ok(statuses, "generated", table)


def _check_served_options(draft: str | None, repetition_penalty: float) -> None:
    """What a served model cannot do, refused by name before any request."""
    if draft is not None:
        raise typer.BadParameter(
            "--draft decodes with two local models; --server takes no --draft", param_hint="'--draft'"
        )
    if repetition_penalty != 1:
        raise typer.BadParameter(
            "--server takes no --repetition-penalty: its rule depends on the sign of the raw logits, "
            "which a server's log-probabilities do not give (generate with a local --model for it)",
            param_hint="'--repetition-penalty'",
        )


def _speculative_options(
    carbon: Carbon, draft: str | None, spec_k: str, dtype: str, device: str | None, batch_size: int
) -> dict[str, Any] | None:
    """``generate`` options for ``--draft``/``--spec-k`` (None without a draft)."""
    if draft is None:
        return None
    from hexamer.engine.speculative import check_compatible

    draft_carbon = load_carbon(draft, dtype, device, batch_size)
    try:
        check_compatible(carbon, draft_carbon)
    except ValueError as exc:
        fail(exc)
    return {"draft": draft_carbon, "num_speculative": spec_k if spec_k == "auto" else int(spec_k)}


def _check_spec_k(spec_k: str) -> None:
    """``--spec-k``: ``auto`` or an integer in [1, MAX_NUM_SPECULATIVE] (the engine's rule)."""
    from hexamer.engine.spec_config import SpecConfig

    try:
        SpecConfig.from_option(spec_k)  # type: ignore[arg-type]
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="'--spec-k'") from exc
