"""One rank of a self-spawned world; started by realrun.launch.run_world, not by hand.

    RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 \\
        python -m realrun.launch.worker /tmp/realrun-abc123    # the dir holds job.json
    python -m realrun.launch.worker --fork-server FD PID       # the fork server instead,
                                                               # whose forked ranks run main()

Reads job.json from the work dir, pins threads, inits the process group, calls the target,
waits at a barrier for the other ranks and writes result-<rank>.json; once that is written the
rank is done, whatever its teardown does. On an error before that it writes error-<rank>.json
(realrun.launch.supervise) and exits 1 at once, skipping a teardown that could block.
"""
from __future__ import annotations

import gc
import json
import os
import sys
from pathlib import Path

def main(workdir: Path) -> None:
    from realrun.launch.finish import exit_now
    from realrun.launch.supervise import write_error

    rank = int(os.environ["RANK"])
    try:
        _run(workdir, rank)
    except BaseException as e:  # includes SystemExit/KeyboardInterrupt raised by the target
        write_error(workdir, rank, e)
        exit_now(1)
    _tear_down()
    # Out now: the interpreter's finalization with torch loaded is slow, and every world paid
    # it (docs/FINDINGS.md#what-a-world-costs-before-its-first-step).
    exit_now(0)


def _tear_down() -> None:
    """After the result is written: leave the group; a failure here is not the run's."""
    import torch.distributed as dist

    try:
        dist.destroy_process_group()
    except Exception as e:  # the value is in; say why teardown failed and exit 0 anyway
        print(f"realrun.launch.worker: teardown after the result: {e}", file=sys.stderr)


def _run(workdir: Path, rank: int) -> None:
    job = json.loads((workdir / "job.json").read_text())
    import torch  # after the job is read, so a bad work dir fails fast

    # Pin intra-op threads before any work: ranks sharing a box must not fight for cores.
    torch.set_num_threads(job["threads_per_rank"])

    from realrun.launch.context import init_group, make_context
    from realrun.launch.run import as_json, resolve_target
    from realrun.launch.supervise import result_path

    fn = resolve_target(job["target"])
    # The imports' objects out of the collector's sight, so a bench turn's gc.collect walks
    # only what the target creates (docs/FINDINGS.md#what-a-world-costs-before-its-first-step)
    gc.freeze()
    ctx = make_context(rank, int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"]),
                       job["backend"])
    init_group(ctx, job["timeout_s"])
    value = as_json(fn(json.loads(job["payload_json"]), ctx))
    # Finish together: a rank stuck in its target makes this barrier time out on the others
    # (after timeout_s), which is how the parent learns which rank hung.
    ctx.barrier()
    # Flush first: once every result is in, the parent may kill a rank slow in teardown.
    sys.stdout.flush()
    sys.stderr.flush()
    tmp = workdir / f".result-{rank}.tmp"
    tmp.write_text(json.dumps(value))
    os.replace(tmp, result_path(workdir, rank))  # atomic: the parent never reads half a file


if __name__ == "__main__":
    if sys.argv[1] == "--fork-server":  # realrun/launch/forkserver_process.py: ranks forked here
        from realrun.launch.forkserver_process import serve
        serve(int(sys.argv[2]), int(sys.argv[3]), main)
        sys.exit(0)
    from realrun.launch.supervise import die_with_parent
    parent = os.environ.get("REALRUN_PARENT_PID")
    die_with_parent(int(parent) if parent else None)
    main(Path(sys.argv[1]))
