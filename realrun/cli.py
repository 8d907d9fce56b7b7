"""``python -m realrun``: profile a preset, benchmark real DDP strategies (and more to come).

    python -m realrun profile --model mlp-8x1024 --out out/profile.json
    python -m realrun bench --strategies bucketed,ddp --bucket-mb 1,10,100
    python -m realrun bench --emulate-hosts 2 --link-gbit 1      # root: 1 Gbit/s hosts

Each subcommand lives in ``realrun/commands/<name>.py`` with ``HELP``, ``add_arguments(parser)``
and ``run(args) -> int``; add a name to COMMANDS to register one. Bad input ends in one line on
stderr and exit code 2; a failed rank in one line naming it and exit code 1.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from simddp.cli import OneLineParser
from simddp.errors import InputError

COMMANDS = ("profile", "bench", "validate")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m realrun", description=__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"realrun.commands.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"realrun.commands.{name}":
                raise
            continue  # a command still being written; the others work
        p = sub.add_parser(name, help=module.HELP, description=module.__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(p)
        p.set_defaults(run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from realrun.errors import LaunchError, NetnsUnavailable
    try:
        return args.run(args) or 0
    except (InputError, NetnsUnavailable) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except LaunchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
