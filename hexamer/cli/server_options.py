"""The ``--server`` option group: any command whose work a served model can do runs on a vLLM /
SGLang / hexamer server instead of a local model, as ``Carbon.from_server`` does in Python.

The group is declared once here: a command takes one parameter ``server: Server | None`` and
:data:`server_options` puts the five options in its place (``--server``, ``--served-model``,
``--api-key``, ``--tokenizer``, ``--top-n``); :func:`open_model` then gives the served front end or
the local model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import typer

from hexamer.cli.app import fail
from hexamer.cli.checks import MAX_TOP_N
from hexamer.cli.option_groups import option_group
from hexamer.cli.sequence_jobs import load_carbon

if TYPE_CHECKING:
    from hexamer.carbon import Carbon
    from hexamer.cli.ray_options import RayRun

__all__ = [
    "LOCAL_MODEL_OPTIONS",
    "Server",
    "check_server_choice",
    "open_model",
    "server_options",
]

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


@dataclass(frozen=True)
class Server:
    """The ``--server`` group's values: the URL and what the connection takes (the other four
    options mean nothing without ``--server`` and are then ignored)."""

    url: str
    model: str | None = None
    api_key: str | None = None
    tokenizer: str | None = None
    top_n: int | None = None

    def connect(self, in_flight: int, command: typer.Context | None = None) -> Carbon:
        """The served model's ``Carbon``, or a clean exit naming what failed. Given the command's context,
        the connection is closed when the command ends, however it ends; otherwise close it."""
        from hexamer.carbon import Carbon
        from hexamer.remote import RemoteError

        try:
            remote = Carbon.from_server(
                self.url,
                model=self.model,
                api_key=self.api_key,
                tokenizer=self.tokenizer,
                top_n=self.top_n,
                max_in_flight=in_flight,
            )
        except (RemoteError, ValueError, OSError) as exc:
            fail(exc)
        if command is not None:
            command.call_on_close(remote.close)
        return remote


def _server(
    server: str | None,
    served_model: str | None,
    api_key: str | None,
    tokenizer: str | None,
    top_n: int | None,
) -> Server | None:
    return None if server is None else Server(server, served_model, api_key, tokenizer, top_n)


#: Put the ``--server`` group in place of the command's ``server`` parameter and hand the command
#: one :class:`Server`, or None without ``--server``. Apply below ``@app.command()``.
server_options = option_group(
    "server",
    (
        ("server", ServerOption, None),
        ("served_model", ServedModelOption, None),
        ("api_key", ApiKeyOption, None),
        ("tokenizer", TokenizerOption, None),
        ("top_n", TopNOption, None),
    ),
    _server,
)


def open_model(
    server: Server | None,
    model: str | None,
    dtype: str,
    device: str | None,
    batch_size: int,
    command: typer.Context | None = None,
) -> Carbon:
    """The model a command runs on: the served model with ``--server`` (``batch_size``
    requests in flight; closed with ``command``), else the local ``--model`` loaded."""
    if server is not None:
        return server.connect(batch_size, command)
    return load_carbon(model, dtype, device, batch_size)


def check_server_choice(
    server: Server | None, model: str | None, ray: RayRun | None = None, command: typer.Context | None = None
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
