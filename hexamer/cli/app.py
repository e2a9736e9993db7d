"""``hexamer`` commands. Each one parses options, calls the Python API and prints with rich."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hexamer import __version__
from hexamer.cache import cache_root
from hexamer.cli.checks import THREADS_MAX, path_option
from hexamer.default_model import default_model

if TYPE_CHECKING:
    from hexamer.tokenizer import CarbonTokenizer

#: ``-h`` as well as ``--help``, on every command (click passes it down to sub-commands)
HELP = {"help_option_names": ["-h", "--help"]}

app = typer.Typer(
    name="hexamer",
    help="Fast, complete, remote-code-free toolkit for Carbon and other 6-mer DNA language models.",
    no_args_is_help=True,
    add_completion=False,
    context_settings=HELP,
)
bench_app = typer.Typer(
    help="Benchmarks that compare hexamer with its peers in the same run.",
    no_args_is_help=True,
    context_settings=HELP,
)
app.add_typer(bench_app, name="bench")
console = Console()
# error lines are never wrapped mid-message nor highlighted, so a message stays one plain line
err_console = Console(stderr=True, soft_wrap=True, highlight=False)

DTypeOption = Annotated[
    Literal["auto", "float32", "bfloat16", "float16", "int8", "int8-bf16"],
    typer.Option(
        help="Weights' dtype (auto: float32 on CPU, the checkpoint's on GPU; int8: int8 decoder "
        "projections with float32 activations, int8-bf16 with bfloat16 ones; docs/quantization.md)."
    ),
]


#: ``--threads`` of a command that runs the model in this process
CpuThreadsOption = Annotated[
    int | None,
    typer.Option(min=1, max=THREADS_MAX, help="CPU threads for PyTorch (default: all cores)."),
]
JsonFlag = Annotated[
    bool, typer.Option("--json", help="Print a one-line JSON summary on stdout (for scripts).")
]


def fail(message: object, code: int = 2) -> NoReturn:
    """Stop the command: ``error: MESSAGE`` on stderr (one line, markup in it shown as is)."""
    err_console.print(f"[red]error:[/red] {escape(str(message))}")
    raise typer.Exit(code)


def print_json(summary: Mapping[str, Any]) -> None:
    """One line of JSON on stdout: what ``--json`` prints instead of the human summary."""
    print(json.dumps(summary, default=str))


def describe_counts(counts: Mapping[str, int]) -> str:
    """``{"SNV": 9, "deletion": 2}`` as the words a person reads: ``SNV 9, deletion 2``."""
    return ", ".join(f"{key} {value:,}" for key, value in counts.items()) or "none"


ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model", "-m", help="Carbon-format model folder or hub id (default: the built-in tiny model)."
    ),
]


#: The cache folder (:func:`hexamer.cache.cache_root`), under the name the CLI modules import.
cache_dir = cache_root


def resolve_model(model: str | None) -> str:
    if model is not None:
        return model
    path, trained = default_model()
    what = (
        "the built-in demo model (tiny, trained on real DNA)"
        if trained
        else "a tiny random-weight test model"
    )
    err_console.print(f"[dim]no --model given: using {what}, not Carbon ({path})[/dim]")
    return str(path)


def load_tokenizer(model: str | None, auto_dna_tags: bool | None = None) -> CarbonTokenizer:
    from hexamer.tokenizer import CarbonTokenizer, ModelFolderError

    try:
        return CarbonTokenizer.from_pretrained(resolve_model(model), auto_dna_tags=auto_dna_tags)
    except ModelFolderError as exc:
        fail(exc)


def token_kind(tokenizer: CarbonTokenizer, token_id: int, mask: int) -> str:
    """What a token is: ``text (BPE)``, ``DNA tag``, ``<oov>`` or ``6-mer``."""
    if mask == -1:
        return "text (BPE)"
    if token_id in (tokenizer.dna_begin_id, tokenizer.dna_end_id):
        return "DNA tag"
    if token_id == tokenizer.oov_token_id:
        return "<oov>"
    return f"{tokenizer.k}-mer"


def token_table(tokenizer: CarbonTokenizer, text: str, title: str) -> Table:
    """One row per token: id, kind, its string and the characters of the input it covers."""
    enc = tokenizer.encode_plus(text)
    table = Table(title=title, show_lines=False)
    for col in ("#", "id", "kind", "token", "covers", "real bases"):
        table.add_column(col, justify="right" if col in ("#", "id", "real bases") else "left")
    for i, (tid, mask, (a, b)) in enumerate(zip(enc.ids, enc.token_mask, enc.offsets, strict=True)):
        table.add_row(
            str(i),
            str(tid),
            token_kind(tokenizer, tid, mask),
            escape(repr(tokenizer.id_to_token(tid))),
            escape(repr(text[a:b])),
            str(mask) if mask > 0 else "",
        )
    return table


def _print_version(value: bool) -> None:
    if value:
        print(__version__)
        raise typer.Exit()


@app.callback()
def main_options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", "-V", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Fast, complete, remote-code-free toolkit for Carbon and other 6-mer DNA language models."""


@app.command()
def version() -> None:
    """Print the hexamer version."""
    print(__version__)


@app.command()
def tokenize(
    text: Annotated[str, typer.Argument(help="Text; put DNA inside <dna>...</dna>.")],
    model: ModelOption = None,
    auto_dna_tags: Annotated[
        bool | None, typer.Option("--auto-dna-tags/--no-auto-dna-tags", help="Wrap untagged input as DNA.")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print ids, token_mask, offsets and kinds as JSON.")
    ] = False,
) -> None:
    """Show how a text + DNA prompt tokenises (ids, kinds, covered characters)."""
    tok = load_tokenizer(model, auto_dna_tags)
    if as_json:
        enc = tok.encode_plus(text)
        kinds = [token_kind(tok, t, m) for t, m in zip(enc.ids, enc.token_mask, strict=True)]
        print_json(
            {"input_ids": enc.ids, "token_mask": enc.token_mask, "offsets": enc.offsets, "kinds": kinds}
        )
        return
    console.print(token_table(tok, text, f"{len(tok.encode(text))} tokens"))


@app.command()
def info(model: ModelOption = None, as_json: JsonFlag = False) -> None:
    """Describe a model folder: vocabulary layout, special ids and Llama shape."""
    from hexamer.tokenizer.folder import read_json, resolve_model_dir

    tok = load_tokenizer(model)
    folder = resolve_model_dir(tok.name_or_path or ".")
    config = read_json(folder / "config.json") or {}
    if config:  # the values shown are the ones a load accepts: an absurd size is refused here too
        from hexamer.model.config import ModelConfig

        try:
            ModelConfig.from_file(folder / "config.json")
        except ValueError as exc:
            fail(exc)
    table = Table(title=str(folder), show_header=False)
    layout = tok.layout
    rows = {
        "vocabulary": f"{len(tok):,} ids (base BPE {layout.dna_start_id:,} + DNA block {layout.dna_vocab_size:,})",
        "DNA tags": f"<dna>={layout.begin_id}  </dna>={layout.end_id}  <oov>={layout.oov_id}",
        f"{layout.k}-mers": f"{layout.kmer_start}..{layout.kmer_stop - 1} (A,T,C,G order), {layout.n_unused} unused pads",
        "eos / pad": f"{tok.eos_token_id} / {tok.pad_token_id}",
        "auto_dna_tags": str(tok.auto_dna_tags),
    }
    for key in (
        "num_hidden_layers",
        "hidden_size",
        "intermediate_size",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "max_position_embeddings",
        "rope_theta",
        "tie_word_embeddings",
        "rope_scaling",
    ):
        if key in config:
            rows[key] = str(config[key])
    if as_json:
        print_json(
            {
                "folder": str(folder),
                "vocab_size": len(tok),
                "dna_start_id": layout.dna_start_id,
                "dna_vocab_size": layout.dna_vocab_size,
                "dna_begin_id": layout.begin_id,
                "dna_end_id": layout.end_id,
                "oov_id": layout.oov_id,
                "k": layout.k,
                "kmer_ids": [layout.kmer_start, layout.kmer_stop],
                "eos_token_id": tok.eos_token_id,
                "pad_token_id": tok.pad_token_id,
                "config": {k: config[k] for k in config if not isinstance(config[k], dict | list)},
            }
        )
        return
    for key, value in rows.items():
        table.add_row(key, value)
    console.print(table)


@app.command()
def demo(
    out: Annotated[
        Path,
        path_option(
            "Folder for every output (TSV, FASTA, PNG, summary.json).",
            "it is a folder of several files",
            "--out",
            "-o",
        ),
    ] = Path("hexamer-demo"),
    model: ModelOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """A short tour on the built-in demo model, each number beside a reference point
    (uniform guessing, shuffled DNA, a Markov chain, published Carbon-3B figures)."""
    from hexamer.demo import run_demo

    path = resolve_model(model)
    if not as_json:
        console.rule("[bold]hexamer demo[/bold]")
        console.print(
            "Carbon reads DNA inside [bold]<dna>…</dna>[/bold] as non-overlapping 6-mers. The built-in model is tiny"
            " and not Carbon; every code path is the real one."
        )
    say = (lambda _m: None) if as_json else (lambda m: console.print(m, highlight=False, markup=False))
    try:
        result = run_demo(out, model=path, say=say)
    except (FileNotFoundError, NotADirectoryError) as exc:
        fail(exc)
    if as_json:
        print(json.dumps(result.to_dict()))
        return
    console.print(
        f"\nevery output is in {result.out_dir} ({len(result.files)} files, {result.seconds:.0f} s)"
    )
    console.print(
        "Point [bold]--model[/bold] at a real Carbon folder (a local copy, or a hub id such as an org/Carbon-3B"
        " name when online):\n"
        "  hexamer generate --model path/to/Carbon-3B ATGGCGTACGATTACA --max-bp 1000\n"
        "  hexamer score --model path/to/Carbon-3B -i seqs.fa -o scores.parquet"
    )


def main() -> None:
    try:
        app()
    except ModuleNotFoundError as exc:  # an optional package a command needs: the hint, not a traceback
        from hexamer.extras import install_hint

        hint = install_hint(exc)
        if hint is None:
            raise
        err_console.print(f"[red]error:[/red] {escape(hint)}")
        raise SystemExit(2) from None
