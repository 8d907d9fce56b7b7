"""The one error type for bad user input.

Every command-line entry point catches :class:`InputError` and prints its message as one line
on stderr with exit code 2, so messages must name the bad value and what would be accepted::

    raise InputError(f"--bucket-mb: {text!r} is not a number > 0 (e.g. 1,10,100)")
"""


class InputError(ValueError):
    """Bad input from a user: a flag, a file or a name. Its message is one line."""
