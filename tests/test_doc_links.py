"""Every relative link in the docs reaches a file, and every #anchor a heading in it.

Walked: docs/**/*.md, README.md and bench/README.md. A link is markdown's ``[text](target)``
outside fenced code blocks and inline code; http(s), mailto and bare ``#anchor`` links into
the same file are checked as the file's own headings.

Anchors follow GitHub's rule for a heading's id, stated here so the test and a reader agree:
the heading's text (links reduced to their text) is lower-cased; every character that is not
a letter, a digit, ``_``, ``-`` or a space is dropped (so ``α`` stays, ``–``, ``:``, ``.``
and backticks go); each space becomes ``-``. A heading whose id is already taken gets ``-1``,
``-2``, … in order.

Source files cite findings, not dated logs: no .py under simddp/, calibrate/ or realrun/
names a dated results file (``docs/results/2026-…``, or such a file's name alone), and every
``docs/FINDINGS.md#anchor`` cited in them exists.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WALKED = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md",
          ROOT / "bench" / "README.md"]
SOURCES = ("simddp", "calibrate", "realrun")

LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(([^()\s]+)\)")
INLINE_CODE = re.compile(r"`[^`]*`")
DATED = re.compile(r"\d{4}-\d{2}-\d{2}-[\w-]+\.md")
FINDINGS_CITE = re.compile(r"docs/FINDINGS\.md#([\w-]+)")


def slug(heading: str) -> str:
    """GitHub's id for a heading's text (the module docstring's rule)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def prose_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, text) of the lines outside fenced code blocks."""
    out, fenced = [], False
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            out.append((n, line))
    return out


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for _, line in prose_lines(path):
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(1))
            k = seen.get(base, 0)
            seen[base] = k + 1
            out.add(base if k == 0 else f"{base}-{k}")
    return out


def links(path: Path) -> list[tuple[int, str]]:
    out = []
    for n, line in prose_lines(path):
        line = INLINE_CODE.sub("", line)
        out += [(n, m.group(1)) for m in LINK.finditer(line)]
        out += [(n, m.group(1)) for m in IMAGE.finditer(line)]
    return out


def broken(path: Path) -> list[str]:
    bad = []
    for n, target in links(path):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):        # http:, https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        where = f"{path.relative_to(ROOT)}:{n}: {target}"
        if not dest.exists():
            bad.append(f"{where} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{where} (no heading #{anchor} in {dest.relative_to(ROOT)})")
    return bad


def test_the_slug_rule_on_headings_this_repo_has():
    assert slug("12. The emulated link has a token bucket") == "12-the-emulated-link-has-a-token-bucket"
    assert slug("3. Which α a step's queue follows") == "3-which-α-a-steps-queue-follows"
    assert slug("Round 1 (05:18–05:26 UTC, load 2.8 → 4.0)") == "round-1-05180526-utc-load-28--40"
    assert slug("`--hold one` on CUDA") == "--hold-one-on-cuda"
    assert slug("Pacing (bbr against cubic)") == "pacing-bbr-against-cubic"


def test_a_missing_file_and_a_missing_heading_are_caught(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "b.md").write_text("# Here\n## Twice\n## Twice\n")
    a = tmp_path / "a.md"
    a.write_text("[ok](b.md#here) [dup](b.md#twice-1) [own](#top)\n# Top\n"
                 "[gone](c.md) [nohead](b.md#there) `[code](d.md)`\n```\n[fenced](e.md)\n```\n")
    assert [b.split(": ", 1)[1] for b in broken(a)] == [
        "c.md (no such file)", "b.md#there (no heading #there in b.md)"]


def test_every_relative_link_in_the_docs_reaches_its_target():
    walked = [p for p in WALKED if p.exists()]
    assert ROOT / "docs" / "FINDINGS.md" in walked and ROOT / "README.md" in walked
    bad = [b for p in walked for b in broken(p)]
    assert not bad, "broken links:\n" + "\n".join(bad)


def _sources() -> list[Path]:
    return [p for d in SOURCES for p in sorted((ROOT / d).rglob("*.py"))]


def test_no_source_file_names_a_dated_results_file():
    named = [f"{p.relative_to(ROOT)}:{n}: {m.group(0)}"
             for p in _sources()
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             for m in [DATED.search(line) or re.search(r"docs/results/20", line)] if m]
    assert not named, ("cite docs/FINDINGS.md#<section> instead:\n" + "\n".join(named))


def test_every_findings_section_cited_in_source_exists():
    have = anchors(ROOT / "docs" / "FINDINGS.md")
    cited = [(p, n, m.group(1)) for p in _sources()
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             for m in FINDINGS_CITE.finditer(line)]
    missing = [f"{p.relative_to(ROOT)}:{n}: #{a}" for p, n, a in cited if a not in have]
    assert not missing, "no such section in docs/FINDINGS.md:\n" + "\n".join(missing)
