"""The one error type for bad user input.

Every command-line entry point catches :class:`InputError` and prints its message as one line
on stderr with exit code 2, so messages must name the bad value and what would be accepted::

    raise InputError(f"--bucket-mb: {text!r} is not a number > 0 (e.g. 1,10,100)")
"""


class InputError(ValueError):
    """Bad input from a user: a flag, a file or a name. Its message is one line."""


def unreadable(path: object, e: OSError) -> InputError:
    """The one-line error for a file that cannot be opened, named as a user would say it."""
    if isinstance(e, IsADirectoryError):
        return InputError(f"{path}: a folder, not a file")
    if isinstance(e, FileNotFoundError):
        return InputError(f"{path}: no such file")
    return InputError(f"{path}: cannot read ({e.strerror or e})")


def error_line(tool: str, message: object) -> str:
    """The one line a failed command prints, in every tool's voice alike.

    >>> error_line("simddp sweep", "--bucket-mb: 'x' is not a number > 0")
    "simddp sweep: error: --bucket-mb: 'x' is not a number > 0"
    """
    return f"{tool}: error: {message}"
