"""One module per ``python -m simddp`` subcommand; shared flags live in :mod:`.common`."""
