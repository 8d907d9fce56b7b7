"""JSON files: profiles, links, host costs and results, read with one-line errors and
written atomically.

Every file carries a ``"format"`` tag so a profile is never read as a link by mistake::

    save_json("profile.json", profile_to_json(profile, host=host))
    profile = load_profile("profile.json")          # InputError on a missing/corrupt file
    host = load_host("profile.json")                # its host_costs section (or a host file)

Formats are documented in docs/FORMATS.md. Writes go to a temporary file that is renamed
into place, so a failed command never leaves a half-written output.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from simddp.errors import InputError
from simddp.inputs.host import Host
from simddp.inputs.link import LEGACY_HOST_FIELDS, Link, LinkPiece
from simddp.inputs.profile import Layer, ModelProfile
from simddp.inputs.topology import Levels

PROFILE_FORMAT = "simddp.profile/1"
LINK_FORMAT = "simddp.link/1"
HOST_FORMAT = "simddp.host/1"


def plain(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj):
        return {f.name: plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(x) for x in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def profile_to_json(profile: ModelProfile, host: Host | None = None) -> dict:
    """The profile file; ``host`` (measured with it) goes in its ``host_costs`` section."""
    doc = {"format": PROFILE_FORMAT, **plain(profile)}
    for layer in doc["layers"]:  # forward-order numbering needs no ids: keep files lean
        if not layer["grad_ids"]:
            del layer["grad_ids"]
    if doc["compute_spread"] is None:
        del doc["compute_spread"]
    if host is not None:
        doc["host_costs"] = plain(host)
    return doc


def link_to_json(link: Link, levels: Levels | None = None) -> dict:
    """The link file; ``levels`` (calibrate on a two-level world) in its ``levels`` section."""
    doc = {"format": LINK_FORMAT, **plain(link)}
    if not doc["kind_fits"]:  # measured per collective kind only by a newer calibrate
        del doc["kind_fits"]
    for fit in doc.get("kind_fits", {}).values():
        if fit["blocking_alpha_s"] is None:  # measured only by a newer calibrate
            del fit["blocking_alpha_s"]
    if doc["burst_bytes"] is None:  # only a shaped link has one
        del doc["burst_bytes"]
    for name in ("idle_wake_s", "blocking_refill_s"):
        if doc[name] is None:  # measured only by a newer calibrate
            del doc[name]
    if link.curves:  # measured curves (docs/FORMATS.md), in the format's key order
        doc["curves"] = [c.to_json() for c in link.curves]
    else:            # a file without them reads as before
        del doc["curves"]
    if levels is not None:
        doc["levels"] = {"gpus_per_node": levels.gpus_per_node,
                         **{name: link_to_json(getattr(levels, name)) for name in
                            ("intra", "inter")}}
        for name in ("intra", "inter"):
            del doc["levels"][name]["format"]
    return doc


def host_to_json(host: Host) -> dict:
    return {"format": HOST_FORMAT, **plain(host)}


def profile_from_json(data: dict, where: str = "profile") -> ModelProfile:
    body = body_of(data, PROFILE_FORMAT, where)
    # "measured": free-form notes on how a profile was measured (realrun profile writes it);
    # "host_costs": the DDP implementations' costs measured with it (load_host reads them)
    extra = sorted(set(body) - {"name", "layers", "optimizer_s", "ready_order", "measured",
                                "host_costs", "compute_spread"})
    if extra:
        raise InputError(f"{where}: unknown profile field(s) {', '.join(extra)}")
    return build(where, lambda: ModelProfile(
        name=body["name"],
        layers=tuple(Layer(**layer) for layer in body["layers"]),
        optimizer_s=body.get("optimizer_s", 0.0),
        ready_order=body.get("ready_order"),
        compute_spread=body.get("compute_spread")))


def _refuse_old_link(body: dict, where: str) -> None:
    """Links written before 2026-11-23 also held the host costs, which now have a file of
    their own: such a link is refused, saying how to get current files."""
    old = [k for k in LEGACY_HOST_FIELDS if k in body]
    if old:
        raise InputError(f"{where}: a link file from before 2026-11-23 (it holds host costs: "
                         f"{', '.join(old)}); re-run python -m calibrate for a current link "
                         "and realrun profile for the host costs")


def link_from_json(data: dict, where: str = "link") -> Link:
    """The file's link: the flat ring's over every rank (its ``levels``, if any, are checked
    here and read by :func:`levels_from_json`)."""
    body = body_of(data, LINK_FORMAT, where)
    _refuse_old_link(body, where)
    if "levels" in body:
        _levels(body.pop("levels"), where)
    return _link_fields(body, where)


def levels_from_json(data: dict, where: str = "link") -> Levels | None:
    """A link file's ``levels`` section (docs/FORMATS.md); None when it has none."""
    body = body_of(data, LINK_FORMAT, where)
    return None if "levels" not in body else _levels(body["levels"], where)


def _levels(section: Any, where: str) -> Levels:
    if not isinstance(section, dict) or sorted(section) != ["gpus_per_node", "inter", "intra"]:
        raise InputError(f"{where}: levels must be {{gpus_per_node, intra, inter}}, got "
                         f"{sorted(section) if isinstance(section, dict) else section!r}")
    for name in ("intra", "inter"):
        if not isinstance(section[name], dict):
            raise InputError(f"{where}: levels.{name} must be an object of link fields")
    return build(where, lambda: Levels(section["gpus_per_node"], *(
        _link_fields(section[name], f"levels.{name}") for name in ("intra", "inter"))))


def _link_fields(body: dict, where: str) -> Link:
    known = {f.name for f in dataclasses.fields(Link)}
    extra = sorted(set(body) - known)
    if extra:
        raise InputError(f"{where}: unknown link field(s) {', '.join(extra)}")
    missing = [f.name for f in dataclasses.fields(Link)
               if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
               and f.name not in body]
    if missing:
        raise InputError(f"{where}: not a valid file (missing link field(s) "
                         f"{', '.join(missing)}; a link needs at least name, alpha_s and "
                         "busbw_gbps: docs/FORMATS.md)")
    return build(where, lambda: Link(**{**body, "pieces": tuple(
        LinkPiece(**p) for p in body.get("pieces", ()))}))


def host_from_json(data: dict, where: str = "host costs") -> Host | None:
    """Host costs from a ``simddp.host/1`` file or a profile's ``host_costs`` section (None
    if that profile has none, or for a link file: links hold none)."""
    fmt = data.get("format") if isinstance(data, dict) else None
    if fmt == PROFILE_FORMAT:
        section = data.get("host_costs")
        return None if section is None else build(where, lambda: Host(**section))
    if fmt == LINK_FORMAT:
        _refuse_old_link(data, where)
        return None
    body = body_of(data, HOST_FORMAT, where)
    return build(where, lambda: Host(**body))


def load_profile(path: str | os.PathLike) -> ModelProfile:
    if str(path).endswith(".py"):  # a model's source: simddp (no torch) cannot run it
        raise InputError(f"{path}: a Python file, not a profile; measure the model first: "
                         f"python -m realrun profile --module {path}:FN --out profile.json "
                         "(FN() returns (model, inputs)), then give profile.json")
    return profile_from_json(read_json(path), str(path))


def load_link(path: str | os.PathLike) -> Link:
    return link_from_json(read_json(path), str(path))


def load_levels(path: str | os.PathLike) -> Levels | None:
    """A link file's per-level fits (:class:`simddp.inputs.topology.Levels`), None if it has none."""
    return levels_from_json(read_json(path), str(path))


def load_host(path: str | os.PathLike) -> Host | None:
    """Host costs from a host, profile or (old) link file; see :func:`host_from_json`."""
    return host_from_json(read_json(path), str(path))


def read_json(path: str | os.PathLike) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read ({e.__class__.__name__}: {e})") from None
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not valid JSON (line {e.lineno}: {e.msg})") from None


def save_json(path: str | os.PathLike, data: Any) -> None:
    write_atomic(path, json.dumps(data, indent=1) + "\n")


def write_atomic(path: str | os.PathLike, text: str | bytes) -> None:
    """Write ``text`` to ``path`` via a temporary file + rename: all or nothing."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:
        raise InputError(f"{path}: cannot write ({e.strerror or e})") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode() if isinstance(text, str) else text)
        # mkstemp creates 0600; give the file the mode a plain open() would (0666 & ~umask)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException as e:
        os.unlink(tmp)
        if isinstance(e, OSError):  # disk full, path is a folder: one line, as above
            raise InputError(f"{path}: cannot write ({e.strerror or e})") from None
        raise


def body_of(data: Any, fmt: str, where: str) -> dict:
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected a JSON object with \"format\": \"{fmt}\"")
    if data.get("format") != fmt:
        raise InputError(f"{where}: format is {data.get('format')!r}, expected {fmt!r}")
    return {k: v for k, v in data.items() if k != "format"}


def build(where: str, make):
    try:
        return make()
    except InputError as e:
        raise InputError(f"{where}: {e}") from None
    except (KeyError, TypeError, ValueError) as e:
        detail = f"missing field {e}" if isinstance(e, KeyError) else str(e).splitlines()[0]
        raise InputError(f"{where}: not a valid file ({detail})") from None
