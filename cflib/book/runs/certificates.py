"""Certificates as the book reads them: which certificate a chapter has, whether it was
made for the chapter's committed run, and what digests it accepts
(:mod:`cflib.book.runs.certify` makes them; :mod:`cflib.book.runs.digests` reads them
through :func:`expected_definitions`)."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from cflib.book.chapters import Chapter
from cflib.book.runs.paths import CHAPTER_DIR, PROJECT_ROOT, rel

CERT_DIR = PROJECT_ROOT / "book" / "certificates"
FORMAT = 1

__all__ = ["CERT_DIR", "FORMAT", "certificate_path", "read_certificate", "record_digest",
           "expected_definitions", "expected_source", "certificate_line", "certificate_digest", "retire"]


def certificate_path(chapter: str) -> Path:
    return CERT_DIR / f"{chapter}.json"


def read_certificate(chapter: str | Chapter) -> dict | None:
    name = chapter.name if isinstance(chapter, Chapter) else chapter
    path = certificate_path(name)
    if not path.exists():
        return None
    try:
        cert = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"{rel(path)} is not a readable certificate ({err}): restore it "
                         f"(`git checkout -- {rel(path)}`) or delete it and re-certify") from None
    if not isinstance(cert, dict) or cert.get("format") != FORMAT:
        raise ValueError(f"{rel(path)} is not a certificate of format {FORMAT}: restore it, "
                         "or delete it and run `cflib certify` again")
    return cert


def record_digest(meta: dict) -> str:
    """sha256 of a chapter's compute record (what a certificate is bound to)."""
    blob = json.dumps(meta["inputs"]["compute"], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def expected_definitions(chapter: Chapter, meta: dict, folder: Path = CHAPTER_DIR
                         ) -> tuple[dict[str, str], set[str]]:
    """The digest each definition a chapter's compute ran should have today: its record's,
    replaced by its certificate's new digest where a certificate made for this record
    maps the recorded digest to it, and the definitions a certificate added.  Returns
    ``(expected, certified keys)``.  Only the book's own run (``book/chapters``) has
    certificates."""
    defs = dict(meta["inputs"]["compute"].get("definitions", {}))
    certified: set[str] = set()
    if Path(folder).resolve() != CHAPTER_DIR.resolve():
        return defs, certified
    cert = read_certificate(chapter)
    if cert is None or cert.get("record") != record_digest(meta):
        return defs, certified
    for key, (old, new) in cert.get("definitions", {}).items():
        if defs.get(key) == old:
            defs[key] = new
            certified.add(key)
    for key, new in cert.get("added", {}).items():
        if key not in defs:
            defs[key] = new
            certified.add(key)
    return defs, certified


def expected_source(chapter: Chapter, meta: dict, folder: Path = CHAPTER_DIR) -> str:
    """The digest a chapter's compute cells should have today: its record's, or the one
    its certificate (made for this record) accepts."""
    recorded = meta["inputs"]["compute"]["source"]
    if Path(folder).resolve() != CHAPTER_DIR.resolve():
        return recorded
    cert = read_certificate(chapter)
    if cert is None or cert.get("record") != record_digest(meta):
        return recorded
    old, new = cert.get("source") or (recorded, recorded)
    return new if old == recorded else recorded


def _definition_name(key: str) -> str:
    """A definition as a reader names it: ``query_dependence`` (dependence.py), or the
    module statements of ``quant.py`` for ``cflib/bench/tables/quant.py::<module>``."""
    module, _, unit = key.partition("::")
    name = module.rsplit("/", 1)[-1]
    if unit == "<module>":
        return f"the module statements of `{name}`"
    return f"`{unit}` ({name})"


def certificate_line(chapter: str, meta: dict) -> str:
    """The sentence a chapter's provenance line adds for its certificate ('' without one
    that applies)."""
    cert = read_certificate(chapter)
    if cert is None or cert.get("record") != record_digest(meta):
        return ""
    names = sorted(cert.get("definitions", {}))
    shown = ", ".join(_definition_name(n) for n in names[:3])
    more = f" and {len(names) - 3} more" if len(names) > 3 else ""
    return (f" *Certified since at commit `{cert['certified_commit']}` ({cert['date']}): "
            f"{len(names)} changed definition{'s' if len(names) != 1 else ''} ({shown}{more}) "
            f"whose twin runs at `smoke` gave bit-equal results; `book/certificates/"
            f"{chapter}.json`.*")


def certificate_digest(chapter: str) -> str:
    """sha256 of a chapter's certificate file ('' without one): a page that shows it is
    re-rendered when it changes."""
    path = certificate_path(chapter)
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.exists() else ""


def retire(chapter: str) -> None:
    """A chapter's full run makes its certificate moot: remove it."""
    path = certificate_path(chapter)
    if path.exists():
        path.unlink()
