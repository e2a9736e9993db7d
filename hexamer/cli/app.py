"""``hexamer`` commands. Each one parses options, calls the Python API and prints with rich."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hexamer import __version__
from hexamer.cache import cache_root

if TYPE_CHECKING:
    from hexamer.carbon import Carbon
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
    Literal["auto", "float32", "bfloat16", "float16"],
    typer.Option(help="Weights' dtype (auto: float32 on CPU, the checkpoint's on GPU)."),
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


def builtin_tiny_model() -> Path:
    """A tiny random-weight Carbon-format folder, built once into the cache (atomically)."""
    from hexamer.testing import build_carbon_folder_once

    return build_carbon_folder_once(cache_dir() / f"tiny-random-{__version__}")


def default_model() -> tuple[Path, bool]:
    """The shipped demo model (trained on real DNA), else the tiny random test model; and whether
    it is the trained one."""
    try:
        from hexamer.demo import demo_model_path

        return demo_model_path(), True
    except (ImportError, FileNotFoundError):
        return builtin_tiny_model(), False


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
def demo() -> None:
    """A short tour on the built-in demo model: tokenise, generate with a mask, score."""
    from hexamer.carbon import Carbon

    path = resolve_model(None)
    carbon = Carbon.from_pretrained(path)
    tok = carbon.tokenizer
    console.rule("[bold]hexamer demo[/bold]")
    console.print(
        "Carbon reads text as byte-level BPE and DNA inside [bold]<dna>…</dna>[/bold] as non-overlapping 6-mers.\n"
        "This demo model is tiny and not Carbon; the id layout and every code path are the real ones."
    )
    prompt = "<mammalian_species><dna>ATGGCGTACGATTACNNAGC</dna>"
    console.print(token_table(tok, prompt, f"1. tokenise: {prompt}"))
    console.print("   the 2-base tail is padded with 'A'; the chunk holding N becomes <oov>")
    fast = tok.encode_dna("ATGGCGTACGATTACNNAGC")
    console.print(
        f"   encode_dna fast path gives the same ids: {fast.tolist() == tok.encode(prompt)[-len(fast) :]}"
    )

    context = _demo_context()
    console.rule("2. generate 60 bp, base-pair level (FNS), with a mask")
    console.print(f"   prompt: ...{context[-42:]} ({len(context)} bp of real DNA)")
    mask = "NNNNNNATGNNNNNNNNNNNNNNNNNNNNNTAA"
    for label, options in (
        ("greedy ", {"temperature": 0}),
        ("sampled", {"temperature": 0.8, "top_p": 0.95, "seed": 0}),
    ):
        gen = carbon.generate(context, max_bp=60, mode="bp", mask=mask, **options)
        console.print(f"   {label}: {gen.sequence}")
    console.print(f"   mask {mask}: positions 7-9 forced to ATG, 31-33 to TAA")

    console.rule("3. score: real DNA vs the same bases shuffled")
    import random

    real = context[-600:]
    shuffled = "".join(random.Random(0).sample(real, len(real)))
    a, b = carbon.score([real, shuffled])
    console.print(f"   mean log P(base), real:     {a.mean:.4f}")
    console.print(f"   mean log P(base), shuffled: {b.mean:.4f}   (uniform guessing: {-1.3863:.4f})")
    _demo_vep_and_embed(carbon)
    console.print(
        "\nPoint [bold]--model[/bold] at a real Carbon folder (a local copy, or a hub id such as an org/Carbon-3B"
        " name when online):\n"
        "  hexamer generate --model path/to/Carbon-3B ATGGCGTACGATTACA --max-bp 1000\n"
        "  hexamer score --model path/to/Carbon-3B -i seqs.fa -o scores.parquet"
    )


def _demo_vep_and_embed(carbon: Carbon) -> None:
    """Score a small VCF of random SNVs on the shipped phage lambda genome, and embed three sequences."""

    import numpy as np

    from hexamer.demo import demo_data_files

    lam = next((p for p in demo_data_files() if "lambda" in p.name), None)
    if lam is None:
        return
    from hexamer.embed import embed_sequences
    from hexamer.io import SequenceRecord
    from hexamer.testing.vcf import write_random_vcf
    from hexamer.vep import score_variants

    console.rule("4. variant effects: 6 random SNVs on phage lambda (window recipe, 1,200 bp)")
    with tempfile.TemporaryDirectory() as tmp:
        vcf = Path(tmp) / "demo.vcf"
        write_random_vcf(lam, vcf, n_sites=6, region=None, seed=1)
        for row in score_variants(carbon, vcf, lam, recipe="window", window=1200, on_note=lambda _: None):
            score = f"{row['score']:+.4f}" if row["score"] is not None else "—"
            console.print(
                f"   {row['chrom']}:{row['pos']} {row['ref']}>{row['alt']}  LL(alt)-LL(ref) = {score}  {row['status']}"
            )
    console.rule("5. embeddings: mean-pooled final hidden states")
    context = _demo_context()
    records = [
        SequenceRecord("lambda_a", context[:600]),
        SequenceRecord("lambda_b", context[600:1200]),
        SequenceRecord("CAG_repeat", "CAG" * 200),
    ]
    vectors = dict(embed_sequences(carbon, records, pool="mean"))
    names = list(vectors)
    unit = {n: v / np.linalg.norm(v) for n, v in vectors.items() if v is not None}
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            console.print(f"   cosine({a}, {b}) = {float(unit[a] @ unit[b]):.3f}")


def _demo_context() -> str:
    """1,200 bp of real DNA (phage lambda) when the shipped data is present, else a fixed sequence."""
    try:
        import pysam

        from hexamer.demo import demo_data_files

        for path in demo_data_files():
            if "lambda" in path.name:
                with pysam.FastxFile(str(path)) as fx:
                    return next(iter(fx)).sequence[1000:2200].upper()
    except (ImportError, StopIteration, OSError):
        pass
    return "ATGGCGTACGATTACAGGCATTCGATCGATTTACGGCATCGA" * 30


def main() -> None:
    app()
