"""``hexamer vep``, ``hexamer embed`` and ``hexamer plot``: thin wrappers of hexamer.vep/embed/plots."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hexamer.cli.app import app, console, err_console
from hexamer.cli.jobs import _progress, count_records, load_carbon


def set_threads(threads: int | None) -> None:
    """``--threads``: PyTorch intra-op threads (None keeps PyTorch's default, one per core)."""
    if threads is not None:
        import torch

        torch.set_num_threads(threads)


def check_plot_path(path: Path) -> None:
    """Fail before hours of scoring, not after, on a plot path that cannot be written."""
    if path.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise typer.BadParameter(f"--plot must end in .png, .svg or .pdf, got {path.name!r}")
    if not path.parent.is_dir():
        raise typer.BadParameter(f"--plot folder {str(path.parent)!r} does not exist")


def connect_server(
    url: str, model: str | None, api_key: str | None, tokenizer: str | None, top_n: int | None, in_flight: int
):  # -> RemoteCarbon (imported lazily: the CLI must start fast)
    """``--server``: a remote scorer, or a clean exit naming what failed."""
    from hexamer.carbon import Carbon
    from hexamer.remote import RemoteError

    try:
        return Carbon.from_server(
            url, model=model, api_key=api_key, tokenizer=tokenizer, top_n=top_n, max_in_flight=in_flight
        )
    except (RemoteError, ValueError) as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc


@app.command()
def vep(
    vcf: Annotated[Path, typer.Option("--vcf", help="Variants: VCF/BCF, plain or bgzipped.")],
    fasta: Annotated[Path, typer.Option("--fasta", help="Reference FASTA (bgzipped + indexed, or plain).")],
    out: Annotated[
        Path, typer.Option("--out", "-o", help=".vcf, .vcf.gz, .bcf, .parquet, .tsv, .csv or .jsonl")
    ],
    model: Annotated[str | None, typer.Option("--model", "-m", help="Model folder or hub id.")] = None,
    recipe: Annotated[
        str, typer.Option(help="window: LL(alt) - LL(ref); next_base: log P(ref) - log P(alt).")
    ] = "window",
    window: Annotated[int, typer.Option(help="Window recipe: bp centred on the variant.")] = 8192,
    window_grid: Annotated[
        int,
        typer.Option(
            min=1,
            help="Window recipe: centre windows on tiles of this many bp so the variants of a tile share "
            "one reference forward (1 = centred on each variant, the published recipe).",
        ),
    ] = 1,
    rc_average: Annotated[
        bool, typer.Option("--rc-average", help="Average with the reverse complement.")
    ] = False,
    context: Annotated[int, typer.Option(help="Next-base recipe: left context in bp.")] = 24576,
    context_grid: Annotated[
        int, typer.Option(help="Next-base: contexts start on this grid (6 = fixed length).")
    ] = 6144,
    batch_size: Annotated[int, typer.Option(min=1)] = 8,
    token_budget: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Most padded tokens per forward (default: 4096 on CPU, 16384 on GPU). Part of a job's "
            "settings: --resume needs the value the run started with.",
        ),
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue a killed run from its checkpoint.")
    ] = False,
    dtype: Annotated[str, typer.Option(help="auto, float32, bfloat16 or float16.")] = "auto",
    device: Annotated[str | None, typer.Option(help="cpu, cuda, ... (default: cuda when present).")] = None,
    threads: Annotated[
        int | None, typer.Option(min=1, help="CPU threads for PyTorch (default: all cores).")
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option("--plot", help="Also draw the score distribution per variant kind (.png/.svg/.pdf)."),
    ] = None,
    server: Annotated[
        str | None, typer.Option(help="Score on a vLLM / SGLang / hexamer server at this URL instead.")
    ] = None,
    served_model: Annotated[
        str | None, typer.Option(help="--server: model name (default: the first).")
    ] = None,
    api_key: Annotated[str | None, typer.Option(envvar="HEXAMER_API_KEY", help="--server: API key.")] = None,
    tokenizer: Annotated[
        str | None, typer.Option(help="--server: local Carbon folder or hub id to tokenise with.")
    ] = None,
    top_n: Annotated[
        int | None, typer.Option(min=1, help="--server: log-probabilities per position.")
    ] = None,
) -> None:
    """Score every variant of a VCF (every record appears in the output, with a status)."""
    from hexamer.vep import FastaError, VcfInputError, status_summary
    from hexamer.vep.engine import count_rows
    from hexamer.vep.resume import ResumeError, run_vep

    set_threads(threads)
    if plot is not None:
        check_plot_path(plot)
    if server is not None and model is not None:
        raise typer.BadParameter("give --model (local) or --server (remote), not both")
    carbon = (
        connect_server(server, served_model, api_key, tokenizer, top_n, batch_size)
        if server is not None
        else load_carbon(model, dtype, device, batch_size)
    )
    try:
        total = count_rows(vcf)  # a real total and ETA for the bar; seconds for millions of lines
    except (OSError, ValueError):
        total = None  # a missing or unreadable file is reported by run_vep, with its reason
    try:
        with _progress() as progress:
            task = progress.add_task("scoring variants", total=total, rate="")

            def tick(n: int) -> None:
                elapsed = progress.tasks[task].elapsed or 1e-9
                done = progress.tasks[task].completed + n
                progress.update(task, advance=n, rate=f"{done / elapsed:,.1f} variants/s")

            result = run_vep(
                carbon,
                vcf,
                fasta,
                out,
                resume=resume,
                on_progress=tick,
                on_note=lambda msg: err_console.print(f"[yellow]{msg}[/yellow]"),
                recipe=recipe,
                window=window,
                window_grid=window_grid,
                rc_average=rc_average,
                context=context,
                context_grid=context_grid,
                batch_size=batch_size,
                token_budget=token_budget,
            )
    except (VcfInputError, FastaError, ResumeError, FileNotFoundError, ValueError) as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc
    finally:
        if server is not None:
            carbon.close()
    summary = status_summary(result.status_counts, result.reason_counts)
    console.print(f"wrote {result.output} ({result.n_rows} rows: {summary})")
    if result.status_counts.get("failed", 0) and not result.status_counts.get("ok", 0):
        err_console.print(
            f"[red]error:[/red] no variant was scored ({summary}); the reasons are in the output"
        )
        raise typer.Exit(1)
    if plot is not None:
        if not result.scores:
            err_console.print("[yellow]no variant was scored: no plot drawn[/yellow]")
            return
        from hexamer import plots

        drawn = plots.plot_score_hist(plot, result.scores, result.kinds)
        console.print(f"wrote {plot} ({drawn})")


@app.command()
def embed(
    input_file: Annotated[Path, typer.Option("--input", "-i", help="FASTA/FASTQ/txt/TSV/CSV/Parquet.")],
    out: Annotated[Path, typer.Option("--out", "-o", help=".parquet, or .npy (+ .ids.txt)")],
    model: Annotated[str | None, typer.Option("--model", "-m", help="Model folder or hub id.")] = None,
    pool: Annotated[
        str, typer.Option(help="mean (content tokens), last (content token) or sep (</dna>).")
    ] = "mean",
    layer: Annotated[
        int, typer.Option(help="Hidden layer; negative counts from the end (-1 = final norm).")
    ] = -1,
    max_tokens: Annotated[
        int | None, typer.Option(help="Chunk length in tokens (default: the context).")
    ] = None,
    chunk_overlap: Annotated[int | None, typer.Option(help="Overlap between chunks, bp.")] = None,
    prefix: Annotated[str, typer.Option(help="Metadata tags before <dna>.")] = "",
    batch_size: Annotated[int, typer.Option(min=1)] = 8,
    dtype: Annotated[str, typer.Option(help="auto, float32, bfloat16 or float16.")] = "auto",
    device: Annotated[str | None, typer.Option(help="cpu, cuda, ...")] = None,
    threads: Annotated[
        int | None, typer.Option(min=1, help="CPU threads for PyTorch (default: all cores).")
    ] = None,
) -> None:
    """Embed sequences (one vector per record; failures reported and kept as empty rows)."""
    from hexamer.embed import embed_sequences, write_embeddings
    from hexamer.io import BadRecord, SequenceInputError, SequenceRecord, read_sequences

    if pool not in ("mean", "last", "sep"):
        raise typer.BadParameter("--pool must be mean, last or sep")
    set_threads(threads)
    carbon = load_carbon(model, dtype, device, batch_size)
    errors: dict[str, str] = {}

    def records():  # a bad input record stays in the output, with no vector and its reason
        for rec in read_sequences(str(input_file)):
            if isinstance(rec, BadRecord):
                ident = rec.id or f"record{rec.index}"
                errors[ident] = rec.reason
                err_console.print(f"[yellow]skipped[/yellow] {rec}")
                yield SequenceRecord(id=ident, sequence="", index=rec.index)
            else:
                yield rec

    def on_error(ident: str, reason: str) -> None:
        if ident not in errors:
            errors[ident] = reason
            err_console.print(f"[yellow]failed[/yellow] {ident}: {reason}")

    try:
        with _progress() as progress:
            task = progress.add_task("embedding", total=count_records(None, input_file), rate="")
            items = embed_sequences(
                carbon,
                records(),
                pool=pool,  # type: ignore[arg-type]
                layer=layer,
                max_tokens=max_tokens,
                chunk_overlap=chunk_overlap,
                prefix=prefix,
                batch_size=batch_size,
                on_error=on_error,
            )
            n = write_embeddings(
                out, items, errors=errors, on_item=lambda _: progress.update(task, advance=1)
            )
    except (SequenceInputError, ValueError) as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc
    console.print(f"wrote {out} ({n} records, {len(errors)} without a vector)")


@app.command()
def plot(
    kind: Annotated[str, typer.Argument(help="hist, roc or pr")],
    table: Annotated[
        Path, typer.Argument(help="A score table (.parquet/.tsv/.csv) from hexamer vep or score.")
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help=".png, .svg or .pdf")],
    score_col: Annotated[str, typer.Option(help="Column holding the scores.")] = "score",
    label_col: Annotated[str | None, typer.Option(help="0/1 label column (roc, pr).")] = None,
    by: Annotated[str | None, typer.Option(help="hist: one histogram per value of this column.")] = None,
    negate: Annotated[
        bool, typer.Option(help="Use -score (window scores are negative for damaging alts).")
    ] = False,
) -> None:
    """Score distribution, or ROC / PR curves against labels."""
    import numpy as np
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    from hexamer import plots

    if kind not in ("hist", "roc", "pr"):
        raise typer.BadParameter("kind must be hist, roc or pr")
    name = table.name.lower()
    try:
        if name.endswith(".parquet"):
            data = pq.read_table(table)
        else:
            opts = pacsv.ParseOptions(delimiter="\t" if name.endswith((".tsv", ".tab")) else ",")
            data = pacsv.read_csv(table, parse_options=opts)
    except Exception as exc:
        err_console.print(f"[red]error:[/red] cannot read {table}: {exc}")
        raise typer.Exit(2) from exc
    missing = [c for c in (score_col, label_col, by) if c and c not in data.column_names]
    if missing:
        err_console.print(
            f"[red]error:[/red] {table} has no column {missing[0]!r}; columns: {data.column_names}"
        )
        raise typer.Exit(2)
    scores = np.asarray(data.column(score_col).to_pylist(), dtype=float)
    keep = ~np.isnan(scores)
    scores = -scores if negate else scores
    if kind == "hist":
        groups = data.column(by).to_pylist() if by else None
        counts = plots.plot_score_hist(
            out, scores[keep], [g for g, k in zip(groups, keep, strict=True) if k] if groups else None
        )
        console.print(f"wrote {out} ({counts})")
        return
    if label_col is None:
        raise typer.BadParameter(f"{kind} needs --label-col")
    labels = np.asarray(data.column(label_col).to_pylist())[keep]
    fn = plots.plot_roc if kind == "roc" else plots.plot_pr
    metrics = fn(out, scores[keep], labels)
    console.print(f"wrote {out} ({', '.join(f'{k}: {v:.4f}' for k, v in metrics.items())})")
