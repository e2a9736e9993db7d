"""``hexamer generate`` and ``hexamer score``: batch jobs over sequence files.

A bad record never stops a job: it is reported (stderr, and a ``status``/``error`` column in table
outputs) and every other record is processed. Outputs are written atomically.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

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
    SEED_MIN,
    check_choice,
    check_output,
    check_runtime,
    is_stdio,
)
from hexamer.cli.scaleout import GpusPerWorkerOption, RayOption, ResumeOption, WorkersOption, check_resume

if TYPE_CHECKING:
    from hexamer.carbon import Carbon
    from hexamer.io import BadRecord, SequenceRecord

CHUNK = 256  # sequences per engine call (records x samples): bounds memory on huge inputs
#: Largest ``generate --n``: samples per prompt (the server's default limit is 64).
MAX_SAMPLES = 1024


def load_carbon(model: str | None, dtype: str, device: str | None, batch_size: int) -> Carbon:
    from hexamer.carbon import Carbon

    try:
        return Carbon.from_pretrained(
            resolve_model(model), dtype=dtype, device=device, max_batch_size=batch_size
        )
    except (FileNotFoundError, ValueError) as exc:  # ModelFolderError is a ValueError
        fail(exc)


def _records(inputs: list[str], input_file: Path | None) -> Iterator[SequenceRecord | BadRecord]:
    """Records from the command line or a file, checked by the same rule either way (a character
    that is not an IUPAC nucleotide code makes a record bad, as in :func:`hexamer.io.read_sequences`)."""
    from hexamer.carbon import sequence_problem
    from hexamer.io import BadRecord, SequenceInputError, SequenceRecord, read_sequences

    if input_file is not None and inputs:
        raise typer.BadParameter("give sequences as arguments or with --input, not both")
    if input_file is None:
        if not inputs:
            raise typer.BadParameter("give sequences as arguments or a file with --input")
        for i, s in enumerate(inputs):
            ident = f"seq{i + 1}"
            problem = "empty sequence" if not s.strip() else sequence_problem("".join(s.split()))
            if problem is not None and "<dna>" not in s:  # generate prompts may hold tags
                yield BadRecord(index=i, id=ident, reason=problem)
            else:
                yield SequenceRecord(id=ident, sequence=s, index=i)
        return
    try:
        yield from read_sequences(str(input_file))
    except SequenceInputError as exc:
        fail(exc)


def count_records(inputs: list[str] | None, input_file: Path | None) -> int | None:
    """How many records a job will read: the progress bar's total (None when unknown: standard
    input, or a file the real pass will report as unreadable). Reading a file twice costs seconds
    per gigabyte; the model work it measures costs far more."""
    from hexamer.io import SequenceInputError, read_sequences

    if input_file is None:
        return len(inputs or [])
    if str(input_file) == "-":
        return None
    try:
        return sum(1 for _ in read_sequences(str(input_file)))
    except (SequenceInputError, OSError, ValueError):
        return None


def _chunks(records: Iterator[Any], size: int) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    for rec in records:
        chunk.append(rec)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err_console,
        transient=False,
    )


class _Output:
    """FASTA (good records only) or a table (every record, with status) at ``path``; stdout FASTA
    when no path is given."""

    def __init__(self, path: Path | None) -> None:
        from hexamer.io import TableWriter

        path = None if path is not None and str(path) == "-" else path  # "-o -": stdout
        self.path = path
        self.fasta: list[tuple[str, str, str]] = []
        self.table: TableWriter | None = None
        self.is_fasta = path is None or is_fasta_name(path)
        if path is not None and not self.is_fasta:
            self.table = TableWriter(path)

    def add(self, rows: list[dict[str, Any]], fasta_key: str | None) -> None:
        if self.table is not None:
            self.table.write_batch(rows)
        elif fasta_key is not None:  # sample j of a record (--n) is named ID_j
            self.fasta.extend(
                (r["id"] if "sample" not in r else f"{r['id']}_{r['sample']}", r[fasta_key], "")
                for r in rows
                if r["status"] == "ok"
            )

    def close(self) -> None:
        from hexamer.io import write_fasta

        if self.table is not None:
            self.table.close()
        elif self.path is not None:
            write_fasta(self.path, self.fasta)
        else:
            for ident, seq, desc in self.fasta:
                print(f">{ident}{' ' + desc if desc else ''}\n{seq}")

    def abort(self) -> None:
        if self.table is not None:
            self.table.abort()


def is_fasta_name(path: Path) -> bool:
    return path.name.lower().endswith(_FASTA_SUFFIXES)


_FASTA_SUFFIXES = (".fa", ".fasta", ".fna", ".fa.gz", ".fasta.gz")


def _check_generate_output(path: Path) -> None:
    """``generate -o``: FASTA or a table, by extension."""
    if not is_fasta_name(path):
        from hexamer.io import table_format

        table_format(path)


def _check_score_output(path: Path) -> None:
    """``score -o``: a table (scores are no sequences)."""
    from hexamer.io import table_format

    if is_fasta_name(path):
        raise ValueError("scores are a table: use .tsv, .csv, .jsonl or .parquet")
    table_format(path)


def _report(bad: list[str]) -> None:
    for line in bad[:20]:
        err_console.print(f"[yellow]skipped[/yellow] {line}")
    if len(bad) > 20:
        err_console.print(f"[yellow]... and {len(bad) - 20} more skipped records[/yellow]")


def fail_if_none_ok(statuses: dict[str, int], verb: str, table: bool) -> None:
    """Exit with status 1 (the output is written by now) when there were records and none is
    ``ok``: a script must not take a job that produced nothing for a success (as ``hexamer vep``)."""
    if sum(statuses.values()) and not statuses.get("ok", 0):
        where = "in the output's error column" if table else "listed above"
        fail(f"no record was {verb} ({describe_counts(statuses)}); the reasons are {where}", code=1)


@app.command()
def generate(
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
    prefix: Annotated[str, typer.Option(help="Metadata tags before <dna>, e.g. <mammalian_species>.")] = "",
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
    as_json: JsonFlag = False,
) -> None:
    """Continue DNA prompts with the model (exact base counts, bp or token level).

    Exits with status 1 (after writing the whole output) when no record is ok."""
    check_runtime(dtype=dtype, device=device)
    check_choice("--mode", mode, ("bp", "token"))
    stops = _check_stops(stop or [])
    if draft is not None:
        from hexamer.engine.speculative import SpecConfig

        try:
            SpecConfig.from_option(spec_k)  # type: ignore[arg-type]
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="'--spec-k'") from exc
    if is_stdio(out):
        out = None
    if as_json and out is None:
        raise typer.BadParameter("--json needs --out FILE: stdout carries the sequences")
    if out is not None:
        check_output("--out", out, _check_generate_output)
    if logprobs and (out is None or is_fasta_name(out)):
        raise typer.BadParameter(
            "--logprobs needs a table output (-o .tsv, .csv, .jsonl or .parquet): FASTA has no column for them"
        )
    if draft is not None and logprobs:
        raise typer.BadParameter("--draft takes no --logprobs")
    carbon = load_carbon(model, dtype, device, batch_size)
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
    if spec_options and set(options) - {"max_bp", "mode", "temperature", "top_p", "mask"}:
        raise typer.BadParameter("--draft takes no --top-k, --min-p or --repetition-penalty")
    try:
        carbon.check_prompt("<dna>", prefix=prefix, **options)
    except ValueError as exc:  # an option error concerns every record: stop here
        raise typer.BadParameter(str(exc)) from exc
    output = _Output(out)
    bad: list[str] = []
    statuses: dict[str, int] = {}
    done_bp = 0  # generated (the rate)
    written_bp = 0  # in the output (after --stop cuts)
    try:
        with _progress() as progress:
            task = progress.add_task("generating", total=count_records(sequences, input_file), rate="")
            for chunk in _chunks(_records(sequences or [], input_file), max(1, CHUNK // n)):
                rows, good = _generate_chunk(carbon, chunk, options, prefix, seed, n, bad)
                if good:
                    ok_rows = [r for r in rows if r["status"] == "ok"]

                    def tick(n_bp: int) -> None:
                        nonlocal done_bp
                        done_bp += n_bp
                        elapsed = progress.tasks[task].elapsed or 1e-9
                        progress.update(task, advance=0, rate=f"{done_bp / elapsed:,.0f} bp/s")

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
    _report(bad)
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


def _speculative_options(
    carbon: Carbon, draft: str | None, spec_k: str, dtype: str, device: str | None, batch_size: int
) -> tuple[dict[str, Any], Any]:
    """``generate`` options for ``--draft``/``--spec-k`` (empty without a draft) and a stats total."""
    if draft is None:
        return {}, None
    from hexamer.engine.speculative import SpecConfig, SpecStats, check_compatible

    try:
        SpecConfig.from_option(spec_k)  # type: ignore[arg-type]
    except ValueError as exc:
        raise typer.BadParameter(f"--spec-k: {exc}") from exc
    draft_carbon = load_carbon(draft, dtype, device, batch_size)
    try:
        check_compatible(carbon, draft_carbon)
    except ValueError as exc:
        fail(exc)
    return {
        "draft": draft_carbon,
        "num_speculative": spec_k if spec_k == "auto" else int(spec_k),
    }, SpecStats()


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
            if gen is not None:
                sample.update(
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


@app.command()
def score(
    sequences: Annotated[list[str] | None, typer.Argument(help="DNA sequences to score.")] = None,
    input_file: Annotated[
        Path | None, typer.Option("--input", "-i", help="FASTA/FASTQ/txt/TSV/CSV/Parquet.")
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help=".tsv, .csv, .jsonl or .parquet; default (or -): TSV on stdout."),
    ] = None,
    model: Annotated[str | None, typer.Option("--model", "-m", help="Model folder or hub id.")] = None,
    level: Annotated[
        Literal["bp", "token"], typer.Option(help="bp (mean per-base log-likelihood) or token.")
    ] = "bp",
    method: Annotated[
        Literal["fns", "exact"],
        typer.Option(help="fns (published marginals) or exact (within-token chain rule)."),
    ] = "fns",
    prefix: Annotated[str, typer.Option(help="Metadata tags before <dna>.")] = "",
    per_base: Annotated[
        bool, typer.Option("--per-base/--no-per-base", help="Also write per-base log-probabilities.")
    ] = False,
    batch_size: Annotated[int, typer.Option(min=1, max=MAX_BATCH_SIZE)] = 16,
    dtype: DTypeOption = "auto",
    device: Annotated[str | None, typer.Option(help="cpu, cuda, ... (default: cuda when present).")] = None,
    ray: RayOption = None,
    workers: WorkersOption = 2,
    shard_records: Annotated[
        int | None, typer.Option(min=1, help="--ray: records per shard, a multiple of 256 (default 4,096).")
    ] = None,
    num_gpus_per_worker: GpusPerWorkerOption = 0.0,
    resume: ResumeOption = False,
    as_json: JsonFlag = False,
) -> None:
    """Log-likelihood of DNA sequences under the model (bp or token level).

    Exits with status 1 (after writing the whole output) when no record is ok."""
    from hexamer.sequence_scores import SCORE_CHUNK, score_record_rows

    check_choice("--level", level, ("bp", "token"))
    check_choice("--method", method, ("fns", "exact"))
    check_runtime(dtype=dtype, device=None if ray else device)  # --ray: the workers' device
    if is_stdio(out):
        out = None  # "-o -": the TSV on stdout
    if as_json and out is None:
        raise typer.BadParameter("--json needs --out FILE: stdout carries the scores")
    if out is not None:
        check_output("--out", out, _check_score_output)  # before scoring, not after
    check_resume(resume, ray)
    if ray is not None:
        from hexamer.cli.scaleout import score_on_ray

        return score_on_ray(
            ray,
            sequences=sequences,
            input_file=input_file,
            out=out,
            model=resolve_model(model),
            workers=workers,
            shard_records=shard_records,
            num_gpus=num_gpus_per_worker,
            dtype=dtype,
            device=device,
            as_json=as_json,
            resume=resume,
            level=level,
            method=method,
            prefix=prefix,
            per_base=per_base,
            batch_size=batch_size,
        )
    carbon = load_carbon(model, dtype, device, batch_size)
    output = _Output(out) if out is not None else None
    stdout_rows: list[dict[str, Any]] = []
    all_statuses: list[str] = []
    bad: list[str] = []
    scored_bp = 0
    try:
        with _progress() as progress:
            task = progress.add_task("scoring", total=count_records(sequences, input_file), rate="")
            for chunk in _chunks(_records(sequences or [], input_file), SCORE_CHUNK):
                scored = score_record_rows(
                    carbon,
                    chunk,
                    level=level,
                    method=method,
                    prefix=prefix,
                    per_base=per_base,
                    batch_size=batch_size,
                )
                rows = scored.rows
                bad.extend(scored.problems)
                scored_bp += scored.scored_bp
                elapsed = progress.tasks[task].elapsed or 1e-9
                progress.update(task, advance=len(rows), rate=f"{scored_bp / elapsed:,.0f} bp/s")
                all_statuses.extend(r["status"] for r in rows)
                if output is not None:
                    output.add(rows, None)
                else:
                    stdout_rows.extend(rows)
    except BaseException:
        if output is not None:
            output.abort()
        raise
    statuses: dict[str, int] = {}
    for status in all_statuses:
        statuses[status] = statuses.get(status, 0) + 1
    if output is not None:
        output.close()
        if as_json:
            print_json({"output": str(out), "n_records": len(all_statuses), "status_counts": statuses})
        else:
            console.print(f"wrote {out} ({describe_counts(statuses)})")
    else:
        columns = list(stdout_rows[0]) if stdout_rows else []
        print("\t".join(columns))
        for row in stdout_rows:
            print("\t".join(_cell(row[c]) for c in columns))
    _report(bad)
    fail_if_none_ok(statuses, "scored", table=True)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    if hasattr(value, "tolist"):
        return ",".join(f"{v:.6g}" for v in value.tolist())
    return str(value)
