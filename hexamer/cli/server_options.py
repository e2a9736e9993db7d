"""The ``--server`` option group: any command whose work a served model can do runs on a vLLM /
SGLang / hexamer server instead of a local model, as ``Carbon.from_server`` does in Python."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from hexamer.cli.app import fail
from hexamer.cli.checks import MAX_TOP_N

if TYPE_CHECKING:
    from hexamer.remote import RemoteCarbon

ServerOption = Annotated[
    str | None, typer.Option(help="Run on a vLLM / SGLang / hexamer server at this URL instead.")
]
ServedModelOption = Annotated[str | None, typer.Option(help="--server: model name (default: the first).")]
ApiKeyOption = Annotated[str | None, typer.Option(envvar="HEXAMER_API_KEY", help="--server: API key.")]
TokenizerOption = Annotated[
    str | None, typer.Option(help="--server: local Carbon folder or hub id to tokenise with.")
]
TopNOption = Annotated[
    int | None, typer.Option(min=1, max=MAX_TOP_N, help="--server: log-probabilities per position.")
]


#: options that set up a local model: with ``--server`` the server decides them
LOCAL_MODEL_OPTIONS = ("dtype", "device", "threads")


def check_server_choice(
    server: str | None, model: str | None, ray: str | None = None, command: typer.Context | None = None
) -> None:
    """``--server`` replaces the local model: refuse it with ``--model`` or ``--ray``, and (given
    the command's context) with a local-model option the user set, which would otherwise be
    silently ignored."""
    if server is None:
        return
    if model is not None:
        raise typer.BadParameter("give --model (local) or --server (remote), not both")
    if ray is not None:
        raise typer.BadParameter("give --ray (actors load the model) or --server, not both")
    for name in LOCAL_MODEL_OPTIONS if command is not None else ():
        source = command.get_parameter_source(name) if name in command.params else None
        if source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT"):
            flag = "--" + name.replace("_", "-")
            raise typer.BadParameter(
                f"{flag} sets up a local model; with --server the server runs the model (drop {flag})",
                param_hint=f"'{flag}'",
            )


def refuse_server(server: str | None, why: str) -> None:
    """A command a served model cannot do: a usage error saying why, before any input is read."""
    if server is not None:
        raise typer.BadParameter(f"--server cannot be used here: {why}", param_hint="'--server'")


def connect_server(
    url: str,
    model: str | None,
    api_key: str | None,
    tokenizer: str | None,
    top_n: int | None,
    in_flight: int,
    command: typer.Context | None = None,
) -> RemoteCarbon:
    """``--server``: the remote front end, or a clean exit naming what failed. Given the command's
    context, the connection is closed when the command ends, however it ends; otherwise close it."""
    from hexamer.carbon import Carbon
    from hexamer.remote import RemoteError

    try:
        remote = Carbon.from_server(
            url, model=model, api_key=api_key, tokenizer=tokenizer, top_n=top_n, max_in_flight=in_flight
        )
    except (RemoteError, ValueError, OSError) as exc:
        fail(exc)
    if command is not None:
        command.call_on_close(remote.close)
    return remote
