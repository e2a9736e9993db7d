"""``hexamer serve``: the OpenAI-compatible + DNA-native HTTP server (docs/server.md)."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from hexamer.cli.app import DTypeOption, ModelOption, app, err_console, fail, resolve_model
from hexamer.cli.checks import MAX_BATCH_SIZE
from hexamer.cli.option_groups import FILLED, option_group
from hexamer.server.settings import (
    DEFAULT_MAX_LOGPROBS,
    DEFAULT_MAX_RESPONSE_VALUES,
    MAX_DRAFT_TOKENS,
    ServerSettings,
)

ResponseValuesOption = Annotated[
    int,
    typer.Option(
        help="Most log-probabilities and per-position scores in one response, counted before the work "
        "(400 above).",
    ),
]

HeadOption = Annotated[str | None, typer.Option(help="A fine-tuned head folder, served at /v1/dna/predict.")]


def _model_path(given: str | None, head: str | None) -> str:
    """The model folder to load; a head folder given as the model, or a --head that is not one,
    is an error before any load."""
    from hexamer.finetune.apply import check_head_folder
    from hexamer.finetune.folders import is_head_folder

    model = resolve_model(given)
    if os.path.isdir(model) and is_head_folder(model):
        raise ValueError(
            f"{model} is a fine-tuned head folder, not a language model: serve its base model with "
            f"--model BASE and add --head {model} (answers /v1/dna/predict)"
        )
    if head is not None:
        check_head_folder(head)
    return model


def _limits(
    api_key: str | None,
    served_model_name: str | None,
    max_num_seqs: int,
    max_model_len: int | None,
    kv_cache_bytes: int | None,
    max_queue: int,
    max_tokens: int,
    max_bp: int,
    max_logprobs: int,
    max_body_bytes: int,
    max_response_values: int,
    max_prompt_chars: int | None,
    timeout: float,
    header_timeout: float,
    body_timeout: float,
    keep_alive: float,
    max_connections: int,
    shutdown_grace: float,
) -> dict[str, Any]:
    """The :class:`~hexamer.server.settings.ServerSettings` keywords these options give (checked
    when the settings are made, with ``--draft-tokens``)."""
    return {
        "api_key": api_key, "served_model_name": served_model_name, "max_num_seqs": max_num_seqs,
        "max_model_len": max_model_len, "kv_cache_bytes": kv_cache_bytes, "max_queue": max_queue,
        "max_tokens": max_tokens, "max_bp": max_bp, "max_logprobs": max_logprobs,
        "max_body_bytes": max_body_bytes, "max_response_values": max_response_values,
        "max_prompt_chars": max_prompt_chars, "request_timeout_s": timeout, "header_timeout_s": header_timeout,
        "body_timeout_s": body_timeout, "keep_alive_s": keep_alive, "max_connections": max_connections,
        "shutdown_grace_s": shutdown_grace,
    }  # fmt: skip


#: What the server accepts and how much work it takes on, handed to ``serve`` as one dict of
#: :class:`~hexamer.server.settings.ServerSettings` keywords.
limit_options = option_group(
    "limits",
    (
        (
            "api_key",
            Annotated[
                str | None,
                typer.Option(
                    help="Require 'Authorization: Bearer KEY' (all endpoints but /health).",
                    envvar="HEXAMER_API_KEY",
                ),
            ],
            None,
        ),
        (
            "served_model_name",
            Annotated[str | None, typer.Option(help="Model id in /v1/models (default: --model).")],
            None,
        ),
        (
            "max_num_seqs",
            Annotated[
                int,
                typer.Option(min=1, max=MAX_BATCH_SIZE, help="Sequences decoded together (KV-cache rows)."),
            ],
            64,
        ),
        (
            "max_model_len",
            Annotated[int | None, typer.Option(help="Tokens per sequence (default: the model's context).")],
            None,
        ),
        (
            "kv_cache_bytes",
            Annotated[
                int | None,
                typer.Option(
                    help="KV-cache pool in bytes (default: 4 GiB on CPU, 80 % of free memory on GPU)."
                ),
            ],
            None,
        ),
        (
            "max_queue",
            Annotated[int, typer.Option(help="Waiting sequences beyond which requests get 429.")],
            1024,
        ),
        ("max_tokens", Annotated[int, typer.Option(help="Largest max_tokens per request.")], 8192),
        (
            "max_bp",
            Annotated[int, typer.Option(help="Largest bases per generated or scored sequence.")],
            49152,
        ),
        (
            "max_logprobs",
            Annotated[int, typer.Option(help="Largest logprobs / prompt_logprobs top-N.")],
            DEFAULT_MAX_LOGPROBS,
        ),
        (
            "max_body_bytes",
            Annotated[int, typer.Option(help="Largest request body (413 above).")],
            32 * 2**20,
        ),
        ("max_response_values", ResponseValuesOption, DEFAULT_MAX_RESPONSE_VALUES),
        (
            "max_prompt_chars",
            Annotated[
                int | None,
                typer.Option(
                    help="Largest prompt string, checked before tokenising (default: 16 x --max-model-len)."
                ),
            ],
            None,
        ),
        (
            "timeout",
            Annotated[
                float,
                typer.Option(
                    help="Seconds from a request's arrival to its cancellation (504, or a stream error event)."
                ),
            ],
            600.0,
        ),
        (
            "header_timeout",
            Annotated[float, typer.Option(help="Seconds a connection has to send a request's headers.")],
            10.0,
        ),
        (
            "body_timeout",
            Annotated[float, typer.Option(help="Seconds a request has to send its whole body (408).")],
            60.0,
        ),
        (
            "keep_alive",
            Annotated[float, typer.Option(help="Seconds an idle keep-alive connection stays open.")],
            5.0,
        ),
        (
            "max_connections",
            Annotated[
                int, typer.Option(help="Open connections beyond which new ones get 503 and are closed.")
            ],
            512,
        ),
        (
            "shutdown_grace",
            Annotated[
                float,
                typer.Option(help="Seconds in-flight requests get to finish after SIGTERM (new ones: 503)."),
            ],
            10.0,
        ),
    ),
    _limits,
)


@app.command()
@limit_options
def serve(
    model: ModelOption = None,
    host: Annotated[
        str, typer.Option(help="Interface to bind; 0.0.0.0 exposes the server to the network.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="TCP port (0: any free port).")] = 8000,
    limits: dict[str, Any] = FILLED,  # what the server accepts (limit_options)
    compile_decode: Annotated[
        bool | None,
        typer.Option(
            help="torch.compile the static decode step (CUDA graphs on GPU); default off (docs/engine.md)."
        ),
    ] = None,
    draft_model: Annotated[
        str | None,
        typer.Option(
            help="Smaller model with the same tokenizer: /v1/dna/generate decodes speculatively with it."
        ),
    ] = None,
    draft_tokens: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=MAX_DRAFT_TOKENS,
            help="6-mers the draft proposes per round (default: adaptive); requests may set num_draft_tokens.",
        ),
    ] = None,
    head: HeadOption = None,
    dtype: DTypeOption = "auto",
    device: Annotated[str | None, typer.Option(help="cpu or cuda (default: cuda when present).")] = None,
    log_level: Annotated[
        Literal["debug", "info", "warning", "error"], typer.Option(help="Server log verbosity.")
    ] = "info",
    view: Annotated[
        list[Path] | None,
        typer.Option(
            "--view",
            help="Result files (tracks, scored VCFs, ISM tables; a FASTA as reference) shown in igv.js at /view/ (repeat).",
        ),
    ] = None,
) -> None:
    """Serve a model over HTTP: /v1/completions, /v1/embeddings, /v1/dna/{generate,score,vep,predict}."""
    from hexamer.server.run import run_server

    logging.basicConfig(level=log_level.upper(), format="%(message)s", stream=sys.stderr)
    from hexamer.view import ViewError, build_site

    try:
        site = build_site(view, None, None) if view else None  # checked before the model loads
        settings = ServerSettings(**limits, draft_tokens=draft_tokens)
        application = _application(
            settings, model=model, head=head, dtype=dtype, device=device, compile_decode=compile_decode,
            draft_model=draft_model, view=site,
        )  # fmt: skip
    except (ViewError, ValueError, TypeError, OSError) as exc:
        fail(exc)
    if host not in ("127.0.0.1", "localhost", "::1") and settings.api_key is None:
        err_console.print(
            f"[yellow]warning:[/yellow] serving on {host} without --api-key: anyone who can reach it can use it"
        )
    run_server(application, host=host, port=port, log_level=log_level.lower())


def _application(
    settings: ServerSettings,
    *,
    model: str | None,
    head: str | None,
    dtype: str,
    device: str | None,
    compile_decode: bool | None,
    draft_model: str | None,
    view: Any = None,
) -> Any:
    """The app ``serve`` runs: the engine's options built once (rows, length and KV budget come from
    ``settings``), the model opened, and the served name defaulted to the model's."""
    from hexamer.carbon import Carbon
    from hexamer.engine import EngineConfig
    from hexamer.server.app import create_app

    given = {"compile_decode": compile_decode}
    engine = EngineConfig.from_options(
        max_batch_size=settings.max_num_seqs, **{k: v for k, v in given.items() if v is not None}
    )
    if settings.draft_tokens is not None and draft_model is None:
        raise ValueError("--draft-tokens needs --draft-model")
    path = _model_path(model, head)
    carbon = Carbon.from_pretrained(path, dtype=dtype, device=device, engine=engine)
    if settings.served_model_name is None:
        settings.served_model_name = model or os.path.basename(os.path.normpath(path))
    return create_app(carbon, settings, draft=draft_model, head=head, view=view)
