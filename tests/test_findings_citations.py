"""Every docs/FINDINGS.md section that simddp/, calibrate/ or realrun/ cites exists.

A source comment gives the reason and cites its evidence as ``docs/FINDINGS.md, <Section>``
(the house rule) or ``docs/FINDINGS.md#<anchor>``. A section is a heading of any level of
FINDINGS.md; ``<Section>`` matches its text case-insensitively, across a comment's line
breaks, and ``#<anchor>`` matches GitHub's id for it (tests/test_doc_links.py's rule).

Run as a script to list every citation and every heading::

    python tests/test_findings_citations.py
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FINDINGS = ROOT / "docs" / "FINDINGS.md"
SOURCES = ("simddp", "calibrate", "realrun")

NAMED = re.compile(r"FINDINGS\.md,[ \t]*")               # FINDINGS.md, <Section>
ANCHORED = re.compile(r"FINDINGS\.md#([\w-]+)")          # FINDINGS.md#<anchor>
# A comma after the file name that starts a clause, not a section's name.
NOT_A_SECTION = {"and", "or", "which", "where", "see", "its", "so", "as", "but"}


def headings(text: str) -> list[str]:
    """The text of every markdown heading outside fenced code, in order."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)):
            out.append(m.group(1))
    return out


def _plain(s: str) -> str:
    return " ".join(s.replace("`", "").split()).casefold()


def slug(heading: str) -> str:
    """GitHub's id for a heading (as tests/test_doc_links.py states it)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _joined(after: str) -> str:
    """The text after a citation with a comment's or docstring's line breaks taken out."""
    return re.sub(r"\s*\n\s*(?:#+\s*|\"\s*)?", " ", after[:300])


def section_named(after: str, names: list[str]) -> str | None:
    """The longest heading that ``after`` starts with (case-insensitive, ending at a
    non-word character), or None."""
    text = _plain(_joined(after))
    found = [n for n in names
             if text.startswith(_plain(n))
             and not re.match(r"\w", text[len(_plain(n)):len(_plain(n)) + 1])]
    return max(found, key=len) if found else None


def citations(text: str) -> list[tuple[int, str, str]]:
    """(line, kind, what) for each citation in a source text: kind "name" with the text that
    follows ``FINDINGS.md, ``, or "anchor" with the anchor."""
    out = []
    for m in NAMED.finditer(text):
        after = _joined(text[m.end():]).lstrip("\"'“‘")
        first = re.match(r"\w*", after).group(0).casefold()
        if first and first not in NOT_A_SECTION:
            out.append((text.count("\n", 0, m.start()) + 1, "name", after))
    for m in ANCHORED.finditer(text):
        out.append((text.count("\n", 0, m.start()) + 1, "anchor", m.group(1)))
    return sorted(out)


def missing(text: str, names: list[str]) -> list[tuple[int, str]]:
    """(line, what) of each citation in ``text`` that names no heading in ``names``."""
    anchors = {slug(n) for n in names}
    bad = []
    for line, kind, what in citations(text):
        if kind == "anchor" and what not in anchors:
            bad.append((line, "#" + what))
        elif kind == "name" and section_named(what, names) is None:
            bad.append((line, what[:60]))
    return bad


def _sources() -> list[Path]:
    return [p for d in SOURCES for p in sorted((ROOT / d).rglob("*.py"))]


def test_a_missing_section_is_caught_and_a_present_one_is_not():
    names = ["What the simulator believes", "Lone alpha", "Pacing (bbr against cubic)",
             "Drift and the compute-only anchor", "Contention",
             "Contention split into alpha and bytes"]
    text = ("# see docs/FINDINGS.md, Lone alpha.\n"
            "# (docs/FINDINGS.md, pacing (BBR against cubic))\n"
            "# docs/FINDINGS.md, Drift and\n#   the compute-only anchor\n"
            "# docs/FINDINGS.md, Contention split into alpha and bytes\n"
            "x = 1  # docs/FINDINGS.md, Lone alphas\n"
            "# docs/FINDINGS.md, Token bucket\n"
            "# docs/FINDINGS.md#lone-alpha docs/FINDINGS.md#token-bucket\n"
            "# docs/FINDINGS.md, and docs/BENCHMARKS.md\n")
    assert [line for line, _ in missing(text, names)] == [6, 7, 8]
    assert section_named("Contention split into alpha and bytes)", names) == \
        "Contention split into alpha and bytes"


def test_headings_of_every_level_count_and_fenced_code_does_not():
    text = "# Top\n## Lone alpha\n### Deep one ###\n```\n## Not a heading\n```\n"
    assert headings(text) == ["Top", "Lone alpha", "Deep one"]


def test_every_findings_section_cited_in_source_exists():
    names = headings(FINDINGS.read_text(encoding="utf-8"))
    bad = [f"{p.relative_to(ROOT)}:{line}: {what}" for p in _sources()
           for line, what in missing(p.read_text(encoding="utf-8"), names)]
    assert not bad, "no such section in docs/FINDINGS.md:\n" + "\n".join(bad)


if __name__ == "__main__":
    names = headings(FINDINGS.read_text(encoding="utf-8"))
    print("headings:")
    for n in names:
        print(f"  {n}  (#{slug(n)})")
    print("citations:")
    for p in _sources():
        for line, kind, what in citations(p.read_text(encoding="utf-8")):
            ok = (what in {slug(n) for n in names} if kind == "anchor"
                  else section_named(what, names) is not None)
            shown = "#" + what if kind == "anchor" else what[:60]
            print(f"  {'ok     ' if ok else 'MISSING'} {p.relative_to(ROOT)}:{line}: {shown}")
    sys.exit(0)
