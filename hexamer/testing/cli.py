"""Run ``hexamer`` commands in tests and check what they return, never the terminal's text.

Rich wraps tables and panels to the terminal's width (a long temporary path moves every line
break) and colours them when ``FORCE_COLOR`` is set, so tests read files, ``--json`` summaries,
the one-line ``error: ...`` messages (``hexamer.cli.app.fail``; never wrapped, never highlighted)
or the exception behind a usage error.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from typer import TyperException
from typer.testing import CliRunner, Result

__all__ = ["error_message", "run", "run_json", "run_ok", "usage_error"]


def run(args: Sequence[str], **kwargs: Any) -> Result:
    """``hexamer ARGS`` in-process (stdout and stderr kept apart)."""
    from hexamer.cli import app

    return CliRunner().invoke(app, [str(a) for a in args], **kwargs)


def run_ok(args: Sequence[str], **kwargs: Any) -> Result:
    """``hexamer ARGS``, which must exit 0 (the assertion message shows what it printed)."""
    result = run(args, **kwargs)
    assert result.exit_code == 0, f"exit {result.exit_code}: {result.output}\n{result.exception!r}"
    return result


def run_json(args: Sequence[str], **kwargs: Any) -> Any:
    """``hexamer ARGS --json``: the JSON summary the command prints as the last line of stdout."""
    result = run_ok([*args, "--json"], **kwargs)
    lines = result.stdout.strip().splitlines()
    assert lines, f"no JSON on stdout: {result.output}"
    return json.loads(lines[-1])


def error_message(result: Result) -> str:
    """What a failed command printed on stderr from its ``error:`` line on, without the prefix
    (a message may go on over several lines of its own, never wrapped by the terminal)."""
    text = result.stderr
    at = text.find("error:")
    assert at >= 0 and (at == 0 or text[at - 1] == "\n"), (
        f"no 'error:' line on stderr (exit {result.exit_code}): {result.output}"
    )
    return text[at + len("error:") :].strip()


def usage_error(args: Sequence[str]) -> TyperException:
    """The usage error (bad option value, missing option...) that ``hexamer ARGS`` stops with.

    Run without click's standalone handling, so the exception itself comes back instead of the
    boxed, wrapped text typer prints for it."""
    result = run(args, standalone_mode=False)
    exc = result.exception
    assert isinstance(exc, TyperException), f"no usage error: {result.output}\n{exc!r}"
    return exc
