"""``python -m realrun``: measure on real ranks what simddp predicts. ``--help`` prints
:data:`DESCRIPTION`, what a user needs; the notes below are for whoever changes this file.

Each subcommand lives in ``realrun/commands/<name>.py`` with ``HELP``, ``add_arguments(parser)``
and ``run(args) -> int``; add a name to COMMANDS to register one. Under torchrun each rank ends
with realrun.launch.finish.finish_torchrun(code): barrier, flush, os._exit, so torch 2.13's
Gloo cannot abort it in teardown after a successful run.
"""
from __future__ import annotations

import sys

from realrun.launch.errors import LaunchError, NetnsUnavailable  # torch-free
from realrun.launch.finish import finish_torchrun  # torch-free
from simddp.cli.main import build_parser, run_command

COMMANDS = ("profile", "bench", "validate", "selfcheck")

# What `python -m realrun --help` says above the command list: for users, no developer notes.
DESCRIPTION = """\
Measure on real ranks what simddp predicts: profile a model, time DDP strategies and bucket
sizes, compare the measurements with the prediction, check a cluster end to end.

    python -m realrun profile --model mlp-8x1024 --out out/profile.json
    python -m realrun bench --model mlp-8x1024 --bucket-mb 1,4,10,40 --out out/bench
    python -m realrun validate --out out/validate
    python -m realrun selfcheck --backend nccl         # on a GPU cluster, first
    python -m realrun COMMAND --help                   # every option of one command

Ranks run on CPU with --backend gloo (the default) or on GPUs with --backend nccl. Bad input
ends in one line on stderr and exit code 2; a rank that fails, in one line naming it and exit
code 1.
"""


def main(argv: list[str] | None = None) -> int:
    parser = build_parser("python -m realrun", DESCRIPTION, "realrun.commands", COMMANDS)
    code = _run(parser.parse_args(argv))
    finish_torchrun(code)  # under torchrun the process ends here, skipping Gloo's teardown
    return code


def _run(args) -> int:
    try:
        return run_command(args, {NetnsUnavailable: 2, LaunchError: 1}, tool="realrun")
    except ModuleNotFoundError as e:  # the simulator's own install has no torch
        if e.name != "torch":
            raise
        print("realrun: error: realrun runs torch: python -m pip install torch==2.13.0 (or your CUDA "
              "build), then python -m pip install 'simddp[torch]'", file=sys.stderr)
        return 2
