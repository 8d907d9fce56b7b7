"""Output folders: a second run into the same --out keeps the first one instead of failing.

    check_out_dir("out/validate", files=("validate.json",))
    # stderr: note: kept the earlier run's 9 files in out/validate/earlier-YYYYMMDD-HHMMSS
    check_out_dir("out/sweep", files=("validate.json",))
    # InputError: --out out/sweep: holds sweep.json from simddp sweep, not realrun validate's
    # files; choose another --out, or pass --force to write there anyway

Rerunning a command into its own folder moves the earlier run's files into a dated
sub-folder, so the README's commands can be run twice without a flag; a folder holding another
command's results is refused, since the two runs' files would mix. ``force`` replaces files
in place.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from simddp.errors import InputError

# command -> what it writes into --out (glob patterns); the first name marks the folder.
# Order matters where one command's files include another's marker: validate writes
# compare.json, so a folder with validate.json is validate's, not compare's.
OUT_FILES = {
    "realrun validate": ("validate.json", "predicted.json", "anchored_predicted.json",
                         "measured.json", "link.json", "profile.json", "compare.json",
                         "compare.csv", "compare_*.png"),
    "calibrate": ("allreduce.json", "allreduce.csv", "kinds.csv", "link.json", "link-p*.json",
                  "allreduce_*.png", "report.txt"),
    "realrun bench": ("bench.json", "bench.csv"),
    "simddp sweep": ("sweep.json", "sweep.csv", "sweep.png"),
    "simddp scale": ("scale.json", "scale.png"),
    "simddp compare": ("compare.json", "compare.csv", "compare_*.png"),
    "simddp trace-import": ("summary.json", "profile.json", "link.json"),
    # a bundle: its steps' files sit in folders, moved aside whole (a name ending in "/")
    "realrun selfcheck": ("selfcheck.json", "calibrate/", "profile/", "bench/", "validate/"),
}
EARLIER_PREFIX = "earlier-"  # earlier-YYYYMMDD-HHMMSS: when the earlier run wrote its marker


def check_out_dir(out: str | os.PathLike | None, flag: str = "--out", files=(),
                  force: bool = False) -> Path | None:
    """``out`` as a Path, ready for this command's files (it may not exist yet); InputError
    naming ``flag`` otherwise. Call it after the other inputs are checked, before any work;
    ``files[0]`` names the command (its marker in OUT_FILES).
    """
    if out is None:
        return None
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise InputError(f"{flag}: {str(out)!r} exists and is not a directory")
    _check_writable(path, flag)
    if force or not files or not path.is_dir():
        return path
    mine = _command_of(files[0]) if files else None
    owner = next((cmd for cmd, names in OUT_FILES.items() if (path / names[0]).exists()), None)
    if owner is not None and owner != mine:
        what = f"not {mine}'s files" if mine else "another command's results"
        raise InputError(f"{flag} {out}: holds {OUT_FILES[owner][0]} from {owner}, {what}; "
                         f"choose another {flag}, or pass --force to write there anyway")
    patterns = OUT_FILES.get(mine, ()) + tuple(files)
    earlier = sorted({p for pattern in patterns for p in path.glob(pattern.rstrip("/"))
                      if (p.is_dir() if pattern.endswith("/") else p.is_file())})
    if earlier:
        marker = path / files[0]
        kept = _free_name(path / (EARLIER_PREFIX + _stamp(marker if marker.exists()
                                                          else earlier[0])))
        what = "files" if all(p.is_file() for p in earlier) else "files and folders"
        kept.mkdir()
        for p in earlier:
            os.replace(p, kept / p.name)  # a rename: same file system, nothing copied
        print(f"note: kept the earlier run's {len(earlier)} {what} in {kept}", file=sys.stderr)
    return path


def check_out_file(out: str | os.PathLike, fmt: str, flag: str = "--out",
                   force: bool = False) -> Path:
    """``out`` as a Path a file of format ``fmt`` can be written to. An earlier file of that
    format is renamed ``<stem>.<time><suffix>`` (a note on stderr says so); any other file
    there is refused unless ``force``."""
    path = Path(out)
    if path.is_dir():
        raise InputError(f"{flag}: {str(out)!r} is a directory; give a file name, "
                         f"e.g. {fmt.split('.')[-1].split('/')[0]}.json")
    _check_writable(path.parent, flag)
    if force or not path.exists():
        return path
    try:
        found = json.loads(path.read_text(encoding="utf-8")).get("format")
    except (OSError, ValueError, AttributeError):
        found = None
    if found != fmt:
        what = f"a {found} file" if isinstance(found, str) else "a file that is not one"
        raise InputError(f"{flag} {out}: holds {what}, not {fmt}; choose another {flag}, "
                         "or pass --force to replace it")
    kept = _free_name(path.with_name(f"{path.stem}.{_stamp(path)}{path.suffix}"))
    os.replace(path, kept)
    print(f"note: kept the earlier {path.name} as {kept}", file=sys.stderr)
    return path


def _command_of(marker: str) -> str | None:
    return next((cmd for cmd, names in OUT_FILES.items() if names[0] == marker), None)


def _stamp(path: Path) -> str:
    """When ``path`` was last written, local time, sortable: YYYYMMDD-HHMMSS."""
    return time.strftime("%Y%m%d-%H%M%S", time.localtime(path.stat().st_mtime))


def _free_name(path: Path) -> Path:
    """``path``, or ``path`` with -2, -3, ... before its suffix if taken (two runs a second)."""
    candidate, n = path, 1
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.stem}-{n}{path.suffix}")
    return candidate


def _check_writable(path: Path, flag: str) -> None:
    parent = next(p for p in (path.absolute(), *path.absolute().parents) if p.exists())
    if not parent.is_dir():
        raise InputError(f"{flag}: {str(parent)!r} is not a directory")
    try:  # a real file, not os.access: root passes access() on a read-only mount
        fd, probe = tempfile.mkstemp(dir=parent, prefix=".simddp-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise InputError(f"{flag}: cannot create files under {str(parent)!r} "
                         f"({e.strerror or e})") from None
