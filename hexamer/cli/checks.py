"""Option checks that run before a command loads a model or reads its input.

Static ranges live in the option declarations (``min=``/``max=``, bounds below); what needs code
(a device that must exist, an output extension, a choice) is checked here and reported as a typer
``BadParameter`` naming the option, with the message of :mod:`hexamer.validate`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from hexamer.io.stdio import STDIO
from hexamer.validate import check_dtype, check_threads, max_threads, parse_device

if TYPE_CHECKING:
    from hexamer.vep.settings import VepSettings

__all__ = [
    "MAX_BATCH_SIZE",
    "MAX_TOKEN_BUDGET",
    "MAX_TOP_N",
    "SEED_MAX_CLI",
    "THREADS_MAX",
    "PrefixOption",
    "check_choice",
    "check_output",
    "check_plot_path",
    "check_runtime",
    "check_vep_settings",
    "fasta_option",
    "is_stdio",
    "not_stdio",
    "path_option",
    "prefix_callback",
]

#: Sequences or windows per forward: far past any GPU's memory, well short of an overflow.
MAX_BATCH_SIZE = 65_536
#: Padded tokens per forward (the GPU default is 16,384).
MAX_TOKEN_BUDGET = 1 << 20
#: Log-probabilities per position asked of a server: at most a whole vocabulary (Carbon: ~156k ids).
MAX_TOP_N = 1 << 18
#: Largest ``--seed``: record i uses seed + i, which must stay within torch's 64-bit range.
SEED_MAX_CLI = 2**63 - 1
#: Largest ``--threads``: this machine's CPU cores.
THREADS_MAX = max_threads()


def _bad(option: str, exc: Exception | str) -> typer.BadParameter:
    return typer.BadParameter(str(exc), param_hint=f"'{option}'")


def check_runtime(*, dtype: str | None = None, device: str | None = None, threads: int | None = None) -> None:
    """``--dtype``, ``--device`` and ``--threads`` (each when given)."""
    try:
        if dtype is not None:
            check_dtype(dtype)
    except ValueError as exc:
        raise _bad("--dtype", exc) from None
    try:
        if device is not None:
            parse_device(device)
    except ValueError as exc:
        raise _bad("--device", exc) from None
    try:
        if threads is not None:
            check_threads(threads)
    except ValueError as exc:
        raise _bad("--threads", exc) from None


def check_vep_settings(settings: VepSettings) -> VepSettings:
    """``settings`` range-checked as the options are parsed, before any model loads
    (:meth:`~hexamer.vep.VepSettings.check`, the rule the library and the server apply): a field
    out of range is a usage error naming its option (``window`` -> ``--window``)."""
    from hexamer.vep.settings import VepSettingsError

    try:
        return settings.check()
    except VepSettingsError as exc:
        raise _bad("--" + exc.field.replace("_", "-"), exc) from None


def check_choice(option: str, value: str, choices: Iterable[str]) -> None:
    choices = tuple(choices)
    if value not in choices:
        raise _bad(option, f"{option.lstrip('-')} must be one of {', '.join(choices)}, got {value!r}")


def check_output(option: str, path: Path, check: object) -> None:
    """Run ``check(path)`` (a library function that raises ValueError on an unsupported name) and
    require the output folder to exist: both fail now, not after the work."""
    try:
        check(path)  # type: ignore[operator]
    except ValueError as exc:
        raise _bad(option, exc) from None
    if not path.parent.is_dir():
        raise _bad(option, f"folder {str(path.parent)!r} does not exist")


def check_plot_path(path: Path | None, option: str = "--plot") -> None:
    """Fail before hours of scoring, not after, on a figure path that cannot be written (None: no
    figure asked for)."""
    if path is None:
        return
    if path.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise typer.BadParameter(f"{option} must end in .png, .svg or .pdf, got {path.name!r}")
    if not path.parent.is_dir():
        raise typer.BadParameter(f"{option} folder {str(path.parent)!r} does not exist")


def prefix_callback(value: str) -> str:
    """``--prefix`` checked as it is parsed: metadata tags only, by the library's rule
    (:func:`hexamer.tokenizer.tags.check_prefix`), so a ``<dna>`` or control token in it is a usage
    error before any model loads."""
    if not value:
        return value
    from hexamer.tokenizer.tags import check_prefix

    try:
        return check_prefix(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc).removeprefix("prefix: ")) from None


#: ``--prefix`` of every command that puts metadata tags before ``<dna>``, checked as it is parsed
PrefixOption = Annotated[
    str,
    typer.Option(help="Metadata tags before <dna>, e.g. <mammalian_species>.", callback=prefix_callback),
]


def is_stdio(path: Path | str | None) -> bool:
    """Whether a path option is ``-`` (standard input or output)."""
    return path is not None and str(path) == STDIO


def not_stdio(why: str) -> Callable[[Any], Any]:
    """A typer option callback that refuses ``-`` (standard input/output) for a file or folder
    option that cannot be a stream, saying ``why``; runs while the command line is parsed."""

    def check(value: Any) -> Any:
        values = value if isinstance(value, list | tuple) else [value]
        if any(is_stdio(v) for v in values):
            raise typer.BadParameter(f"'-' (standard input/output) cannot be used here: {why}")
        return value

    return check


def path_option(help_text: str, why: str, *names: str) -> Any:
    """A typer option naming a file or folder that ``-`` cannot stand for (``why``, as in
    :func:`not_stdio`); ``names``: its flags when not the parameter's own (e.g. ``"--data", "-d"``)."""
    return typer.Option(*names, help=help_text, callback=not_stdio(why))


def fasta_option(help_text: str = "Reference FASTA: plain, bgzip (indexed or not) or plain gzip.") -> Any:
    """A ``--fasta`` reference option: ``-`` is refused, the reference is read by position."""
    return path_option(
        help_text, "the reference is read by position (indexed), which a pipe cannot do", "--fasta"
    )
