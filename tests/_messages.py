"""Bad input's one line, checked by what it names (a flag, a file, a value), not its wording.

    assert_one_line(err, "--factor", "0.5")   # one line, no traceback, names both
"""
from __future__ import annotations

_EDGES = ":;,()'\"`"


def words(text: str) -> set[str]:
    """The whitespace-separated tokens of ``text``, quotes and punctuation at their ends off.

    >>> sorted(words("--factor must be > 1, got '0.5'"))
    ['--factor', '0.5', '1', '>', 'be', 'got', 'must']
    """
    return {w.strip(_EDGES) for w in text.split()}


def assert_names(text: str, *names: str) -> None:
    """Each of ``names`` is one of ``text``'s tokens."""
    missing = [n for n in names if n not in words(text)]
    assert not missing, (missing, text)


def assert_one_line(err: str, *names: str) -> None:
    """``err`` is one line, no traceback, and names each of ``names`` (single tokens)."""
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert_names(err, *names)
