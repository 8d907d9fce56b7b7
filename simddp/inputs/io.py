"""JSON files: profiles, link files and host costs, read with one-line errors and written
atomically (results files: simddp/result.py).

Every file carries a ``"format"`` tag so a profile is never read as a link by mistake::

    save_json("profile.json", profile_to_json(profile, host=host))
    profile = load_profile("profile.json")          # InputError on a missing/corrupt file
    host = load_host("profile.json")                # its host_costs section (or a host file)
    measured = load_link_file("link.json")          # the link, and what calibrate measured beside it

Formats: docs/FORMATS.md (``simddp.link/1`` files still read). Writes are atomic.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from simddp.errors import InputError, unreadable
from simddp.inputs.contention import Contention, check_factor, check_factors
from simddp.inputs.gloo_host import SECTION as GLOO_HOST, GlooHost
from simddp.inputs.host import Host
from simddp.inputs.link import KindFit, Link, LinkPiece
from simddp.inputs.link_file import Levels, LinkFile
from simddp.inputs.profile import Layer, ModelProfile

PROFILE_FORMAT = "simddp.profile/1"
LINK_FORMAT = "simddp.link/2"
# simddp.link/1's flat fields that now have sections of their own (:func:`_from_link_1`).
LINK_FORMAT_1 = "simddp.link/1"
LINK_1_GLOO_FIELDS = ("blocking_alpha_s", "burst_bytes", "idle_wake_s", "blocking_refill_s")
LINK_1_CONTENTION_FIELDS = ("compute_slowdown", "comm_slowdown")
# Link files that held host costs (now simddp.host/1) are refused, saying how to get them.
LINK_1_HOST_COST_FIELDS = ("copy_gbps", "scale_gbps", "hook_s", "ddp_hook_s", "launch_s")
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
    for name in ("compute_spread", "device"):
        if doc[name] is None:
            del doc[name]
    if host is not None:
        doc["host_costs"] = plain(host)
    return doc


def link_to_json(link: Link | LinkFile, levels: Levels | None = None) -> dict:
    """The link file (``simddp.link/2``) of a link, or of a link and what was measured beside
    it; ``levels`` (calibrate on a two-level world): its ``levels`` section."""
    doc = {"format": LINK_FORMAT, **_link_body(link if isinstance(link, LinkFile)
                                               else LinkFile(link, levels=levels))}
    if levels is not None and isinstance(link, LinkFile) and link.levels is None:
        doc["levels"] = _levels_body(levels)
    return doc


def _link_body(f: LinkFile) -> dict:
    doc = plain(f.link)
    if not doc["kind_fits"]:  # measured per collective kind only by calibrate
        del doc["kind_fits"]
    if f.link.curves:  # measured curves (docs/FORMATS.md), in the format's key order
        doc["curves"] = [c.to_json() for c in f.link.curves]
    else:
        del doc["curves"]
    if f.contention is not None:
        doc["contention"] = {"compute": f.contention.compute, "comm": f.contention.comm}
    if f.host is not None:
        doc[GLOO_HOST] = f.host.to_json()
    if f.levels is not None:
        doc["levels"] = _levels_body(f.levels)
    return doc


def _levels_body(levels: Levels) -> dict:
    return {"gpus_per_node": levels.gpus_per_node,
            **{name: _link_body(getattr(levels, name)) for name in ("intra", "inter")}}


def host_to_json(host: Host) -> dict:
    return {"format": HOST_FORMAT, **plain(host)}


def profile_from_json(data: dict, where: str = "profile") -> ModelProfile:
    body = body_of(data, PROFILE_FORMAT, where)
    # "measured": free-form notes on how a profile was measured (realrun profile writes it);
    # "host_costs": the DDP implementations' costs measured with it (load_host reads them)
    extra = sorted(set(body) - {"name", "layers", "optimizer_s", "ready_order", "measured",
                                "host_costs", "compute_spread", "device"})
    if extra:
        raise InputError(f"{where}: unknown profile field(s) {', '.join(extra)}")
    return build(where, lambda: ModelProfile(
        name=body["name"],
        layers=tuple(Layer(**layer) for layer in body["layers"]),
        optimizer_s=body.get("optimizer_s", 0.0),
        ready_order=body.get("ready_order"),
        compute_spread=body.get("compute_spread"),
        device=body.get("device") or measured_device(body.get("measured"))))


def measured_device(measured: Any) -> str | None:
    """What a profile's ``measured`` section says the compute ran on: its ``device``, else
    "cuda" where it was measured over NCCL; None where it does not say::

        >>> measured_device({"backend": "nccl"}), measured_device({"device": "cpu"}), measured_device(None)
        ('cuda', 'cpu', None)
    """
    if not isinstance(measured, dict):
        return None
    if isinstance(measured.get("device"), str):
        return measured["device"]
    return "cuda" if measured.get("backend") == "nccl" else None


def link_from_json(data: dict, where: str = "link") -> Link:
    """The file's link: the flat ring's over every rank, the network only
    (:func:`link_file_from_json` for what was measured beside it)."""
    return link_file_from_json(data, where).link


def link_file_from_json(data: dict, where: str = "link") -> LinkFile:
    """The link and its sections (docs/FORMATS.md), from a ``simddp.link/2`` or
    ``simddp.link/1`` file."""
    if isinstance(data, dict) and data.get("format") == LINK_FORMAT_1:
        data = {**_from_link_1(data, where), "format": LINK_FORMAT}
    return _link_file(body_of(data, LINK_FORMAT, where), where)


def _from_link_1(data: dict, where: str) -> dict:
    """A ``simddp.link/1`` body in ``simddp.link/2``'s shape. Measured contention comes with
    a (possibly empty) ``gloo_host``, so its links still split a model's contention
    (docs/FINDINGS.md#contention-split-into-alpha-and-bytes)."""
    old = [k for k in LINK_1_HOST_COST_FIELDS if k in data]
    if old:
        raise InputError(f"{where}: an early simddp.link/1 file (it holds host costs: "
                         f"{', '.join(old)}); re-run python -m calibrate for a current link "
                         "and realrun profile for the host costs")
    body = {k: v for k, v in data.items()
            if k not in LINK_1_GLOO_FIELDS + LINK_1_CONTENTION_FIELDS + ("levels",)}
    factors = tuple(data.get(k, 1.0) for k in LINK_1_CONTENTION_FIELDS)
    for name, value in zip(LINK_1_CONTENTION_FIELDS, factors):
        check_factor(f"{where}: link {data.get('name')!r}", name, value)
    if factors != (1.0, 1.0):
        body["contention"] = {"compute": factors[0], "comm": factors[1]}
    gloo = {k: data[k] for k in LINK_1_GLOO_FIELDS if data.get(k) is not None}
    fits = data.get("kind_fits")
    if isinstance(fits, dict):
        kinds = {k: f["blocking_alpha_s"] for k, f in fits.items()
                 if isinstance(f, dict) and f.get("blocking_alpha_s") is not None}
        if kinds:
            gloo["kind_blocking_alpha_s"] = kinds
        body["kind_fits"] = {k: {n: v for n, v in f.items() if n != "blocking_alpha_s"}
                             if isinstance(f, dict) else f for k, f in fits.items()}
    if gloo or "contention" in body:
        body[GLOO_HOST] = gloo
    if "levels" in data:
        section = data["levels"]
        body["levels"] = section if not isinstance(section, dict) else {
            k: (_from_link_1(v, f"{where}: levels.{k}") if k in ("intra", "inter")
                and isinstance(v, dict) else v) for k, v in section.items()}
    return body


def _link_file(body: dict, where: str) -> LinkFile:
    body = dict(body)
    contention = _contention(body.pop("contention", None), where)
    host = None if GLOO_HOST not in body else GlooHost.from_json(body.pop(GLOO_HOST), where)
    levels = None if "levels" not in body else _levels(body.pop("levels"), where)
    return LinkFile(_link_fields(body, where), contention, host, levels)


def _contention(section: Any, where: str) -> Contention | None:
    """A link file's ``contention``: calibrate's factors; None where both are 1.0 (none)."""
    if section is None:
        return None
    if not isinstance(section, dict) or sorted(section) != ["comm", "compute"]:
        raise InputError(f"{where}: contention must be {{compute, comm}}, got {section!r}")
    factors = check_factors(where, "contention", (section["compute"], section["comm"]))
    return None if factors == (1.0, 1.0) else Contention(*factors, source="link")


def levels_from_json(data: dict, where: str = "link") -> Levels | None:
    """A link file's ``levels`` section (docs/FORMATS.md); None when it has none."""
    return link_file_from_json(data, where).levels


def _levels(section: Any, where: str) -> Levels:
    if not isinstance(section, dict) or sorted(section) != ["gpus_per_node", "inter", "intra"]:
        raise InputError(f"{where}: levels must be {{gpus_per_node, intra, inter}}, got "
                         f"{sorted(section) if isinstance(section, dict) else section!r}")
    for name in ("intra", "inter"):
        if not isinstance(section[name], dict):
            raise InputError(f"{where}: levels.{name} must be an object of link fields")
    return build(where, lambda: Levels(section["gpus_per_node"], *(
        _link_file(section[name], f"{where}: levels.{name}") for name in ("intra", "inter"))))


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
        LinkPiece(**p) for p in body.get("pieces", ())), "kind_fits": {
            k: KindFit(**f) if isinstance(f, dict) else f
            for k, f in (body.get("kind_fits") or {}).items()}}))


def host_from_json(data: dict, where: str = "host costs") -> Host | None:
    """Host costs from a ``simddp.host/1`` file or a profile's ``host_costs`` section (None
    if that profile has none, or for a link file: links hold none)."""
    fmt = data.get("format") if isinstance(data, dict) else None
    if fmt == PROFILE_FORMAT:
        section = data.get("host_costs")
        return None if section is None else build(where, lambda: Host(**section))
    if fmt in (LINK_FORMAT, LINK_FORMAT_1):
        link_file_from_json(data, where)   # an early link file is refused, saying why
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
    """A link file's link: the network and its collective library only."""
    return load_link_file(path).link


def load_link_file(path: str | os.PathLike) -> LinkFile:
    """A link file whole: the link and what was measured beside it (contention, Gloo's host
    effects, levels: :class:`simddp.inputs.link_file.LinkFile`)."""
    return link_file_from_json(read_json(path), str(path))


def load_levels(path: str | os.PathLike) -> Levels | None:
    """A link file's per-level fits (:class:`simddp.inputs.link_file.Levels`), None if it has none."""
    return load_link_file(path).levels


def load_host(path: str | os.PathLike) -> Host | None:
    """Host costs from a host, profile or (old) link file; see :func:`host_from_json`."""
    return host_from_json(read_json(path), str(path))


def read_json(path: str | os.PathLike) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise unreadable(path, e) from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a text file (not UTF-8)") from None
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
