"""Metadata tags and prefixes: what a user may put before ``<dna>``.

Carbon's metadata tags (``<mammalian_species>``, ``<fungi_species>``, gene-region types) are plain
BPE text before ``<dna>`` (``shared/spec/carbon.md`` §2). A prefix or tag that carries ``<dna>``,
``</dna>``, ``<oov>`` or a control token (``<|endoftext|>``) would change what is scored or generated
(the DNA would start earlier, end, or follow an end-of-text) while the job reports ``ok``. So a tag
is a *name* (:data:`TAG_NAME_RULE`; hexamer writes the ``<name>`` form) and a prefix is a run of
such tags, optionally separated by whitespace. Every front end (CLI, ``Carbon``, ``ScoreOptions``,
the server) checks with these functions, so the rule is the same everywhere.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["TAG_NAME_RULE", "check_prefix", "check_tag_name", "tag_prefix"]

#: the characters of a tag name, as error messages and docs state it
TAG_NAME_RULE = "letters, digits, '_', '-' and '.'"
#: longest tag name: Carbon's are under 40 characters; a longer one is a slip, not a tag
MAX_TAG_NAME = 64

_NAME = re.compile(r"[A-Za-z0-9_.\-]+")
_TAG = re.compile(r"<([A-Za-z0-9_.\-]+)>")
_SPACE = re.compile(r"\s*")
#: names whose ``<name>`` is a token of the vocabulary, not BPE text: the DNA tags, the pads of the
#: DNA block and Qwen3's added tokens written without ``|`` (control tokens have a ``|`` and fail
#: the character rule anyway)
_RESERVED = re.compile(r"dna|oov|unused_\d+|think|tool_call|tool_response", re.IGNORECASE)


def _name_problem(name: str) -> str | None:
    if not name:
        return "an empty name"
    if len(name) > MAX_TAG_NAME:
        return f"a name of {len(name)} characters (at most {MAX_TAG_NAME})"
    if not _NAME.fullmatch(name):
        return f"a name holds only {TAG_NAME_RULE}"
    if _RESERVED.fullmatch(name):
        return f"<{name}> is a DNA or control token of the vocabulary, not a metadata tag"
    return None


def check_tag_name(name: object, field: str = "tags") -> str:
    """``name`` as a metadata tag name (``mammalian_species``); ``<name>`` is accepted too and read
    as ``name``. ``ValueError`` naming ``field`` otherwise."""
    if not isinstance(name, str):
        raise ValueError(f"{field}: a tag must be a string, got {type(name).__name__}")
    bare = name.strip()
    match = _TAG.fullmatch(bare)
    if match is not None:
        bare = match.group(1)
    problem = _name_problem(bare)
    if problem is not None:
        raise ValueError(f"{field}: tag {name!r}: {problem} (hexamer writes the <name> form)")
    return bare


def check_prefix(prefix: object, field: str = "prefix") -> str:
    """``prefix`` when it is metadata tags only (``<a><b>``, whitespace between them allowed, or
    empty). ``ValueError`` naming ``field`` and the first character that breaks the rule."""
    if not isinstance(prefix, str):
        raise TypeError(f"{field} must be a str, got {type(prefix).__name__}")
    at = 0
    while True:
        at = _SPACE.match(prefix, at).end()  # type: ignore[union-attr]
        if at == len(prefix):
            return prefix
        match = _TAG.match(prefix, at)
        problem = None if match is None else _name_problem(match.group(1))
        if match is None or problem is not None:
            shown = prefix[at : at + 24] + ("..." if len(prefix) > at + 24 else "")
            why = problem or f"not a <name> tag (a name of {TAG_NAME_RULE})"
            raise ValueError(
                f"{field}: {shown!r} at character {at + 1}: {why}; a prefix is metadata tags only, "
                "such as <mammalian_species>"
            )
        at = match.end()


def tag_prefix(tags: Sequence[str] | None, prefix: str = "", field: str = "tags") -> str:
    """``<tag1><tag2>...`` from tag names, followed by ``prefix``; both checked."""
    if tags is not None and isinstance(tags, str):
        raise ValueError(f"{field}: give a list of tag names, not one string")
    names = [check_tag_name(tag, field) for tag in tags or []]
    return "".join(f"<{name}>" for name in names) + check_prefix(prefix)
