"""``python -m simddp``: sweep, simulate, models, links, collectives, account, compare,
trace-import.

    python -m simddp sweep --bucket-mb 1,10,100,1000          # defaults: see --help
    python -m simddp simulate --strategy ddp --bucket-mb 25 --trace trace.json --plot gantt.png
    python -m simddp models;  python -m simddp links

Each subcommand lives in ``simddp/cli/<name>.py`` with ``HELP``, ``add_arguments(parser)``
and ``run(args) -> int``. Bad input anywhere ends in one line on stderr and exit code 2.
"""
from __future__ import annotations

import argparse
import importlib
import os
import re
import sys

from simddp.errors import InputError, error_line

# What `python -m simddp --help` shows: for users (the module text above is for developers)
DESCRIPTION = """Predict a data-parallel training step by simulation: which gradient-sync strategy
and which bucket_cap_mb are fastest for this model on this network.

    python -m simddp sweep --bucket-mb 1,10,100,1000          # every strategy, four sizes
    python -m simddp sweep --model transformer-xl --link ib-hdr --world-size 16
    python -m simddp simulate --strategy ddp --bucket-mb 25 --trace trace.json --plot gantt.png
    python -m simddp models;  python -m simddp links          # the presets
    python -m simddp collectives --link nvlink-h100-nvls --world-size 8
    python -m simddp scale --model config.json --gpus 8,64,512 --strategies ddp,fsdp,hsdp

Each command has its own --help. Bad input ends in one line on stderr and exit code 2."""

COMMANDS = ("sweep", "simulate", "models", "links", "collectives", "account", "compare",
            "trace-import", "scale")


_NEGATIVE_VALUE = re.compile(r"^-\.?\d")  # "-5", "-5,10", "-.5": a value, not a flag


def join_negative_values(argv: list[str]) -> list[str]:
    """``--bucket-mb -5,10`` -> ``--bucket-mb=-5,10``, so argparse hands the value to our own
    check ("'-5' must be a number > 0") instead of saying "expected one argument".

    >>> join_negative_values(["--bucket-mb", "-5,10", "--steps", "3"])
    ['--bucket-mb=-5,10', '--steps', '3']
    """
    out: list[str] = []
    for token in argv:
        if out and _NEGATIVE_VALUE.match(token) and out[-1].startswith("--") \
                and "=" not in out[-1]:
            out[-1] = f"{out[-1]}={token}"
        else:
            out.append(token)
    return out


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line (plus exit code 2), not a usage dump."""

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        argv = sys.argv[1:] if args is None else list(args)
        return super().parse_known_args(join_negative_values(argv), namespace)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, error_line(self.prog.removeprefix("python -m "), f"{message} (see --help)") + "\n")


def build_parser(prog: str = "python -m simddp", description: str = DESCRIPTION,
                 package: str = "simddp.cli", commands: tuple[str, ...] = COMMANDS,
                 argv: list[str] | None = None) -> argparse.ArgumentParser:
    """A parser with one subcommand per module ``<package>.<name>`` (realrun uses it too).
    Where ``argv`` names one of them, only that module is imported (the others are listed by
    name): a command starts without importing every other command's dependencies."""
    parser = OneLineParser(prog=prog, description=description,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = next((a for a in argv or () if not a.startswith("-")), None)
    chosen = chosen if chosen in commands else None
    for name in commands:
        if chosen is not None and name != chosen:
            sub.add_parser(name)
            continue
        module_name = f"{package}.{name.replace('-', '_')}"   # trace-import: trace_import.py
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if e.name != module_name:
                raise
            continue  # a command still being written; the others work
        p = sub.add_parser(name, help=module.HELP, description=module.__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(p)
        p.set_defaults(run=module.run)
    return parser


def run_command(args: argparse.Namespace, exit_codes: dict | None = None,
                tool: str = "simddp") -> int:
    """Run the chosen subcommand; a listed error type ends in one line and its exit code."""
    codes = {InputError: 2, **(exit_codes or {})}
    try:
        return args.run(args) or 0
    except tuple(codes) as e:
        print(error_line(tool, e), file=sys.stderr)
        return next(code for kind, code in codes.items() if isinstance(e, kind))
    except BrokenPipeError:  # `... | head` closed stdout: not an error worth a traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    return run_command(build_parser(argv=argv).parse_args(argv))
