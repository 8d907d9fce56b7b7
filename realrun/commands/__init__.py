"""One module per ``python -m realrun`` subcommand; shared model flags live in :mod:`.common`."""
