"""``hexamer build-niah``: write Genome-NIAH cells from a genome FASTA (see hexamer.evals.niah_build)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from hexamer.cli.app import app, console, fail
from hexamer.cli.checks import path_option
from hexamer.cli.option_groups import FILLED, option_group

if TYPE_CHECKING:
    from hexamer.evals.niah_build import NiahBuildConfig


def _niah_config(
    fasta: list[Path] | None,
    ctx: str,
    tasks: str,
    n: int,
    seed: int,
    depths: str,
    distractors: int,
    key_len: int,
    value_len: int,
    stitch_from: str,
    min_run: int,
) -> NiahBuildConfig:
    from hexamer.evals.niah_build import (
        DEFAULT_GENOME,
        NiahBuildConfig,
        parse_ctx_list,
        parse_depths,
        parse_list,
    )
    from hexamer.evals.tasks.niah_cells import parse_ctx

    try:
        cfg = NiahBuildConfig(
            ctx=parse_ctx_list(ctx),
            tasks=tuple(parse_list(tasks, "tasks")),
            n=n,
            seed=seed,
            depths=parse_depths(depths),
            key_len=key_len,
            value_len=value_len,
            n_distractors=distractors,
            stitch_from=parse_ctx(stitch_from),
            min_run=min_run,
            fasta=tuple(str(p) for p in (fasta or [DEFAULT_GENOME])),
        )
    except ValueError as exc:
        fail(exc)
    for p in cfg.fasta:
        if not Path(p).is_file():
            fail(f"--fasta {p} does not exist")
    return cfg


#: What a cell holds, handed to ``build-niah`` as one :class:`~hexamer.evals.niah_build.NiahBuildConfig`.
niah_options = option_group(
    "config",
    (
        (
            "fasta",
            Annotated[
                list[Path] | None,
                path_option(
                    "Genome FASTA (.fa/.fa.gz); repeat for several (rows cycle through them). "
                    "Default: the shipped 100 kbp human chr20 slice (enough for contexts up to 16k tokens).",
                    "each genome is recorded by its file name in the datasets it builds",
                ),
            ],
            None,
        ),
        (
            "ctx",
            Annotated[str, typer.Option(help="Context lengths in 6-mer tokens, e.g. 4k,8k,16k or 256.")],
            "4k,8k",
        ),
        (
            "tasks",
            Annotated[
                str,
                typer.Option(help="Tasks: niah and/or neardup_dX (decoy keys X bp away from the true key)."),
            ],
            "niah,neardup_d4,neardup_d2,neardup_d1",
        ),
        ("n", Annotated[int, typer.Option("--n", min=1, help="Rows per cell.")], 500),
        ("seed", Annotated[int, typer.Option(help="Random seed (a cell is fully determined by it).")], 42),
        (
            "depths",
            Annotated[str, typer.Option(help="Needle depths in percent of the haystack (rows cycle).")],
            "10,25,50,75,90",
        ),
        ("distractors", Annotated[int, typer.Option(min=0, help="Decoy pairs in the neardup tasks.")], 8),
        ("key_len", Annotated[int, typer.Option(help="KEY length in bp (a multiple of 6).")], 24),
        ("value_len", Annotated[int, typer.Option(help="VALUE length in bp (a multiple of 6).")], 24),
        (
            "stitch_from",
            Annotated[
                str, typer.Option(help="Contexts of at least this many tokens use stitched A/C/G/T runs.")
            ],
            "32k",
        ),
        (
            "min_run",
            Annotated[int, typer.Option(min=1, help="Shortest A/C/G/T run used in stitched haystacks (bp).")],
            1000,
        ),
    ),
    _niah_config,
)


@app.command("build-niah")
@niah_options
def build_niah_cmd(
    out: Annotated[
        Path,
        path_option(
            "Output folder: one OUT/niah_{task}_{L}/test.parquet per cell.",
            "it is a folder of datasets, one per task and length",
            "--out",
            "-o",
        ),
    ],
    config: NiahBuildConfig = FILLED,  # what a cell holds (niah_options)
) -> None:
    """Build Genome-NIAH cells: random KEY/VALUE pairs planted in a real-genome haystack, in the
    public dataset's schema (uid, prompt, value, value_len_bp, context_length_tokens,
    positive_sequence, negative_sequence, plus key, depth and decoy columns)."""
    from hexamer.evals.niah_build import build_niah, prompt_length_bp
    from hexamer.evals.tasks.niah_cells import parse_cell

    cfg, n = config, config.n
    try:
        with console.status(f"building {len(cfg.ctx) * len(cfg.tasks)} cell(s) of {n} rows"):
            paths = build_niah(cfg, out)
    except (ValueError, FileNotFoundError, OSError) as exc:
        fail(exc)
    table = Table(title=f"Genome-NIAH cells in {out}")
    for col in ("cell", "rows", "prompt bp", "haystack", "file"):
        table.add_column(col, justify="right" if col in ("rows", "prompt bp") else "left")
    for path in paths:
        rel = path.relative_to(out)
        cell = parse_cell(rel.parts[0])
        assert cell is not None
        ctx_tokens = cell[1]
        table.add_row(
            rel.parts[0],
            str(n),
            f"{prompt_length_bp(ctx_tokens, cfg.value_len):,}",
            "stitched" if ctx_tokens >= cfg.stitch_from else "contiguous",
            str(rel),
        )
    console.print(table)
