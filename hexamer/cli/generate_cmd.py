"""``hexamer generate``: continue each prompt of a sequence file (or the command line), ``--n``
samples each, optionally with a draft model; FASTA keeps the good records, a table every one."""

from __future__ import annotations

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
)
from hexamer.cli.checks import (
    MAX_BATCH_SIZE,
    SEED_MAX_CLI,
    SEED_MIN,
    PrefixOption,
    check_choice,
    check_output,
    check_runtime,
    is_stdio,
)
from hexamer.cli.sequence_jobs import (
    CHUNK,
    MAX_SAMPLES,
    JobOutput,
    check_generate_output,
    chunks,
    count_records,
    fail_if_none_ok,
    is_fasta_name,
    load_carbon,
    progress_bar,
    read_job_records,
    report_skipped,
)

if TYPE_CHECKING:
    from hexamer.carbon import Carbon


@app.command()
@served.server_options
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
    max_bp: Annotated[int, typer.Option(min=1, help="New bases per prompt (exact).")] = 1000,
    mode: Annotated[
        Literal["bp", "token"], typer.Option(help="bp (FNS, base by base) or token (whole 6-mers).")
    ] = "bp",
    temperature: Annotated[float, typer.Option(min=0.0, help="0 = greedy.")] = 1.0,
    top_p: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Nucleus filter (per base in bp mode).")
    ] = 1.0,
    top_k: Annotated[
        int, typer.Option(min=0, help="Token mode: keep the k most likely 6-mers (0 = off).")
    ] = 0,
    min_p: Annotated[
        float,
        typer.Option(min=0.0, max=1.0, help="Token mode: keep 6-mers with >= min_p x the top probability."),
    ] = 0.0,
    repetition_penalty: Annotated[
        float, typer.Option(min=0.0, help="Penalise 6-mers already in the prompt or output (1 = off).")
    ] = 1.0,
    n: Annotated[
        int,
        typer.Option(
            "--n",
            min=1,
            max=MAX_SAMPLES,
            help="Samples per prompt: a sample column in tables, IDs ID_0, ID_1 ... in FASTA.",
        ),
    ] = 1,
    stop: Annotated[
        list[str] | None,
        typer.Option(
            "--stop",
            metavar="DNA",
            help="Cut a sequence before this DNA string (repeatable; finish_reason stop).",
        ),
    ] = None,
    logprobs: Annotated[
        bool,
        typer.Option(
            "--logprobs/--no-logprobs",
            help="Tables: a logprobs list column, the model's log-probability of each new base "
            "(bp mode) or 6-mer (token mode).",
        ),
    ] = False,
    seed: Annotated[
        int | None,
        typer.Option(
            min=SEED_MIN,
            max=SEED_MAX_CLI,
            help="Sample j of record i uses seed + i * n + j (i: its index in the input).",
        ),
    ] = None,
    mask: Annotated[
        str | None, typer.Option(help="IUPAC mask over the first new bases, e.g. NNNATGNNN.")
    ] = None,
    prefix: PrefixOption = "",
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
    sampler: Annotated[
        Literal["auto", "client", "server"],
        typer.Option(
            help="--server: where 6-mers are drawn. client: here, from the server's top-N (a --seed gives "
            "the local model's sequences); server: the server's own sampler (token mode, no --mask, "
            "prompts of whole 6-mers, vLLM or hexamer server); auto: the server's where it can.",
        ),
    ] = "auto",
    server: served.Server | None = None,  # the --server options (server_options)
    as_json: JsonFlag = False,
) -> None:
    """Continue DNA prompts with the model (exact base counts, bp or token level).

    Exits with status 1 (after writing the whole output) when no record is ok."""
    served.check_server_choice(server, model, command=command)
    check_runtime(dtype=dtype, device=device)
    check_choice("--mode", mode, ("bp", "token"))
    stops = _check_stops(stop or [])
    _check_spec_k(spec_k)  # with or without --draft: a wrong value is wrong either way
    if is_stdio(out):
        out = None
    if as_json and out is None:
        raise typer.BadParameter("--json needs --out FILE: stdout carries the sequences")
    if out is not None:
        check_output("--out", out, check_generate_output)
    if logprobs and (out is None or is_fasta_name(out)):
        raise typer.BadParameter(
            "--logprobs needs a table output (-o .tsv, .csv, .jsonl or .parquet): FASTA has no column for them"
        )
    if draft is not None and logprobs:
        raise typer.BadParameter("--draft takes no --logprobs")
    if server is None and sampler != "auto":
        raise typer.BadParameter(
            "--sampler chooses where a served model samples: add --server", param_hint="'--sampler'"
        )
    if server is not None:
        _check_served_options(draft, repetition_penalty)
    records = read_job_records(sequences or [], input_file)  # an unusable file stops us before the load
    carbon = served.open_model(server, model, dtype, device, batch_size, command)
    spec_options, spec_total = _speculative_options(carbon, draft, spec_k, dtype, device, batch_size)
    options = {"max_bp": max_bp, "mode": mode, "temperature": temperature, "top_p": top_p, "mask": mask}
    options.update(
        {
            name: value
            for name, value, off in (
                ("top_k", top_k, 0),
                ("min_p", min_p, 0.0),
                ("repetition_penalty", repetition_penalty, 1.0),
            )
            if value != off
        }
    )
    if spec_options and "repetition_penalty" in options:
        raise typer.BadParameter("--draft takes no --repetition-penalty")
    checks = options  # what each prompt is checked with (a served model also checks its sampler)
    if server is not None:
        options["sampler"] = sampler
        checks = {**options, "logprobs": logprobs}
    try:  # the length alone, against the context and the KV memory, before any prompt is read
        carbon.check_generation_length(max_bp, None)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="'--max-bp'") from exc
    try:
        carbon.check_prompt("<dna>", prefix=prefix, **checks)
    except ValueError as exc:  # an option error concerns every record: stop here
        raise typer.BadParameter(str(exc)) from exc
    import warnings

    from hexamer.backend.results import FailedResultWarning

    output = JobOutput(out)
    bad: list[str] = []
    statuses: dict[str, int] = {}
    done_bp = 0  # generated (the rate)
    written_bp = 0  # in the output (after --stop cuts)
    try:
        with progress_bar() as progress:
            task = progress.add_task("generating", total=count_records(sequences, input_file), rate="")
            for chunk in chunks(records, max(1, CHUNK // n)):
                rows, good = _generate_chunk(carbon, chunk, checks, prefix, seed, n, bad)
                if good:
                    ok_rows = [r for r in rows if r["status"] == "ok"]

                    def tick(n_bp: int) -> None:
                        nonlocal done_bp
                        done_bp += n_bp
                        elapsed = progress.tasks[task].elapsed or 1e-9
                        progress.update(task, advance=0, rate=f"{done_bp / elapsed:,.0f} bp/s")

                    with warnings.catch_warnings():  # a failed generation is a failed row
                        warnings.simplefilter("ignore", FailedResultWarning)
                        gens = carbon.generate(
                            [r["prompt"] for r in ok_rows],
                            seed=[r["seed"] for r in ok_rows] if seed is not None else None,
                            prefix=prefix,
                            on_progress=tick,
                            n=n,
                            stop=stops or None,
                            logprobs=logprobs,
                            **options,
                            **spec_options,
                        )
                    if spec_total is not None and carbon.last_spec_stats is not None:
                        spec_total.merge(carbon.last_spec_stats)
                    for i, row in enumerate(ok_rows):  # the n samples of a prompt come together
                        row["gens"] = gens[i * n : (i + 1) * n]
                        failed = next((g for g in row["gens"] if g.status != "ok"), None)
                        if failed is not None:  # each sample row has its own status; the record fails
                            row.update(status="failed", error=failed.reason)
                            bad.append(f"record {row['id']!r}: {failed.reason}")
                for row in rows:
                    statuses[row["status"]] = statuses.get(row["status"], 0) + 1
                samples = _sample_rows(rows, n, logprobs)
                written_bp += sum(r["n_bp"] for r in samples)
                output.add(samples, "sequence")
                progress.update(task, advance=len(rows))
    except BaseException:
        output.abort()
        raise
    output.close()
    report_skipped(bad)
    if spec_total is not None:
        err_console.print(f"speculative decoding: {spec_total.summary()}")
    if as_json:
        print_json(
            {
                "output": str(out),
                "n_records": sum(statuses.values()),
                "status_counts": statuses,  # per input record (a record has n sample rows)
                "n_samples": n,
                "n_bp": written_bp,
                "speculative": None
                if spec_total is None
                else {
                    "acceptance_rate": spec_total.acceptance_rate,
                    "tokens_per_forward": spec_total.tokens_per_forward,
                    "mean_k": spec_total.mean_k,
                },
            }
        )
    elif output.path is not None:
        console.print(f"wrote {out} ({describe_counts(statuses)})")
    fail_if_none_ok(statuses, "generated", output.table is not None)


def _check_served_options(draft: str | None, repetition_penalty: float) -> None:
    """What a served model's ``Carbon.generate`` cannot do, refused by name before any request."""
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
) -> tuple[dict[str, Any], Any]:
    """``generate`` options for ``--draft``/``--spec-k`` (empty without a draft) and a stats total."""
    if draft is None:
        return {}, None
    from hexamer.engine.speculative import SpecStats, check_compatible

    draft_carbon = load_carbon(draft, dtype, device, batch_size)
    try:
        check_compatible(carbon, draft_carbon)
    except ValueError as exc:
        fail(exc)
    return {
        "draft": draft_carbon,
        "num_speculative": spec_k if spec_k == "auto" else int(spec_k),
    }, SpecStats()


def _check_spec_k(spec_k: str) -> None:
    """``--spec-k``: ``auto`` or an integer in [1, MAX_NUM_SPECULATIVE] (the engine's rule)."""
    from hexamer.engine.spec_config import SpecConfig

    try:
        SpecConfig.from_option(spec_k)  # type: ignore[arg-type]
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="'--spec-k'") from exc


def _check_stops(stops: list[str]) -> list[str]:
    """``--stop`` values: non-empty A/C/G/T strings (upper-cased), as ``Carbon.generate`` takes."""
    for value in stops:
        if not value or not set(value.upper()) <= set("ACGT"):
            raise typer.BadParameter(
                f"must be a non-empty string of A/C/G/T, got {value!r}", param_hint="'--stop'"
            )
    return [value.upper() for value in stops]


def _sample_rows(rows: list[dict[str, Any]], n: int, logprobs: bool) -> list[dict[str, Any]]:
    """The output rows of a chunk's records: one per record and sample (``--n``), every record's
    samples included, a skipped or failed record's too (with its status and error)."""
    import numpy as np

    out: list[dict[str, Any]] = []
    for row in rows:
        row.pop("prompt")
        row.pop("seed")
        gens = row.pop("gens", None) or [None] * n
        for j, gen in enumerate(gens):
            sample = {"id": row["id"], **({"sample": j} if n > 1 else {}), **row}
            if logprobs:  # typed even when empty: a Parquet column's type is set by its first batch
                sample["logprobs"] = np.zeros(0, dtype=np.float64)
            if gen is not None and gen.status != "ok":  # the model's output turned NaN/inf
                sample.update(status="failed", error=gen.reason, finish_reason=gen.finish_reason)
            elif gen is not None:
                sample.update(
                    status="ok",
                    error="",
                    sequence=gen.sequence,
                    n_bp=gen.n_bp,
                    finish_reason=gen.finish_reason,
                    n_prompt_oov_bases=gen.n_prompt_oov_bases,
                )
                if logprobs and gen.logprobs is not None:
                    sample["logprobs"] = gen.logprobs
            out.append(sample)
    return out


def _generate_chunk(
    carbon: Carbon,
    chunk: list[Any],
    options: dict[str, Any],
    prefix: str,
    seed: int | None,
    n: int,
    bad: list[str],
) -> tuple[list[dict[str, Any]], int]:
    from hexamer.io import BadRecord, normalize_sequence

    rows: list[dict[str, Any]] = []
    good = 0
    for rec in chunk:
        row: dict[str, Any] = {
            "id": rec.id,
            "status": "ok",
            "error": "",
            "sequence": "",
            "n_bp": 0,
            "finish_reason": "",
            "n_prompt_oov_bases": 0,
            "prompt": "",
            "seed": None if seed is None else seed + rec.index * n,  # sample j: + j
        }
        if isinstance(rec, BadRecord):
            row.update(status="skipped", error=rec.reason)
            bad.append(str(rec))
        else:
            prompt = normalize_sequence(rec.sequence)
            try:
                carbon.check_prompt(prompt, prefix=prefix, **options)
                row["prompt"] = prompt
                good += 1
            except ValueError as exc:
                row.update(status="failed", error=str(exc).removeprefix("prompt 0: "))
                bad.append(f"record {rec.index} ({rec.id!r}): {row['error']}")
        rows.append(row)
    return rows, good
