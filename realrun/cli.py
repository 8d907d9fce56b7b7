"""``python -m realrun``: profile a preset, benchmark real DDP strategies (and more to come).

    python -m realrun profile --model mlp-8x1024 --out out/profile.json
    python -m realrun bench --strategies bucketed,ddp --bucket-mb 1,10,100
    python -m realrun bench --emulate-hosts 2 --link-gbit 1      # root: 1 Gbit/s hosts

Each subcommand lives in ``realrun/commands/<name>.py`` with ``HELP``, ``add_arguments(parser)``
and ``run(args) -> int``; add a name to COMMANDS to register one. Bad input ends in one line on
stderr and exit code 2; a failed rank in one line naming it and exit code 1. Under torchrun
each rank ends with realrun.launch.finish.finish_torchrun(code): barrier, flush, os._exit,
so torch 2.13's Gloo cannot abort it in teardown after a successful run.
"""
from __future__ import annotations

import sys

from realrun.launch.errors import LaunchError, NetnsUnavailable  # torch-free
from realrun.launch.finish import finish_torchrun  # torch-free
from simddp.cli import build_parser, run_command

COMMANDS = ("profile", "bench", "validate", "selfcheck")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser("python -m realrun", __doc__, "realrun.commands", COMMANDS)
    code = _run(parser.parse_args(argv))
    finish_torchrun(code)  # under torchrun the process ends here, skipping Gloo's teardown
    return code


def _run(args) -> int:
    try:
        return run_command(args, {NetnsUnavailable: 2, LaunchError: 1})
    except ModuleNotFoundError as e:  # the simulator's own install has no torch
        if e.name != "torch":
            raise
        print("error: realrun runs torch: python -m pip install torch==2.13.0 (or your CUDA "
              "build), then python -m pip install 'simddp[torch]'", file=sys.stderr)
        return 2
