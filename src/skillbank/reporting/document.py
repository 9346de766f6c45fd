"""The sections as two documents: report.html (one file that opens offline: every picture a base64 PNG
inside it, no script, no link or URL to fetch) and report.md (the same text, pictures as PNG files beside
it). The sections shown come in order (the summary first); those without data are left out and named
once, in grey, with the inputs each needs. Written atomically, and only under --out, after every section
was built: bad input leaves nothing behind.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

from skillbank import atomic
from skillbank.reporting.sections import Bullets, Image, Markdown, Part, Section, Table

STYLE = ("body{font-family:sans-serif;max-width:72em;margin:2em auto;padding:0 1em;line-height:1.4}"
         "table{border-collapse:collapse;margin:.8em 0}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left;vertical-align:top;font-size:.9em}"
         "img{max-width:100%}td img{height:64px;max-width:none;image-rendering:pixelated}"
         ".needs{color:#666;font-size:.85em}nav a{margin-right:1em}code{background:#f4f4f4;padding:0 .2em}")
_CODE = re.compile(r"`([^`]+)`")


def _inline(text: str) -> str:
    """Plain text with `code` spans, as HTML."""
    return _CODE.sub(lambda m: f"<code>{m.group(1)}</code>", html.escape(text))


def _img_html(img: Image) -> str:
    return f"<img alt='{html.escape(img.alt)}' src='data:image/png;base64,{base64.b64encode(img.png).decode()}'>"


def _md_cell(cell: str | Image) -> str:
    if isinstance(cell, Image):
        return f"![{cell.alt}]({cell.name})"
    return cell.replace("|", "\\|").replace("\n", " ")


def _markdown_html(text: str) -> str:
    """A markdown pipe table and plain paragraphs (what `skillbank compare` prints) as HTML."""
    out, table = [], []
    for line in [*text.splitlines(), ""]:
        if line.strip().startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= set("-: ") for c in cells):
                table.append(cells)
            continue
        if table:
            head, *body = table
            out.append("<table><tr>" + "".join(f"<th>{_inline(c)}</th>" for c in head) + "</tr>"
                       + "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>" for row in body) + "</table>")
            table = []
        if line.strip():
            out.append(f"<p>{_inline(line.strip().lstrip('#').strip())}</p>")
    return "\n".join(out)


def _part_html(part: Part) -> str:
    if isinstance(part, Bullets):
        return "<ul>" + "".join(f"<li>{_inline(item)}</li>" for item in part.items) + "</ul>"
    if isinstance(part, Image):
        return f"<p>{_img_html(part)}</p>"
    if isinstance(part, Table):
        head = "".join(f"<th>{html.escape(h)}</th>" for h in part.head)
        body = "".join("<tr>" + "".join(f"<td>{_img_html(c) if isinstance(c, Image) else _inline(c)}</td>" for c in row) + "</tr>"
                       for row in part.rows)
        return f"<table><tr>{head}</tr>{body}</table>"
    if isinstance(part, Markdown):
        return _markdown_html(part.text)
    return f"<p>{_inline(part)}</p>"


def _part_md(part: Part) -> str:
    if isinstance(part, Bullets):
        return "\n".join(f"- {item}" for item in part.items)
    if isinstance(part, Image):
        return f"![{part.alt}]({part.name})"
    if isinstance(part, Table):
        lines = ["| " + " | ".join(part.head) + " |", "|" + " --- |" * len(part.head)]
        return "\n".join(lines + ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in part.rows])
    if isinstance(part, Markdown):
        return part.text.strip()
    return part


def _missing_lines(sections: list[Section]) -> list[str]:
    return [f"{s.title}: {s.why} (needs {s.needs})" for s in sections if not s.shown]


def to_html(title: str, intro: list[str], sections: list[Section]) -> str:
    e = html.escape
    shown = [s for s in sections if s.shown]
    parts = ["<!doctype html>", "<html><head><meta charset='utf-8'>", f"<title>{e(title)}</title><style>{STYLE}</style></head><body>",
             f"<h1>{e(title)}</h1>", *(f"<p>{_inline(line)}</p>" for line in intro),
             "<nav>" + "".join(f"<a href='#{s.key}'>{e(s.title)}</a>" for s in shown) + "</nav>"]
    for s in shown:
        parts.append(f"<section id='{s.key}'><h2>{e(s.title)}</h2>")
        parts += [_part_html(p) for p in s.parts]
        parts.append("</section>")
    missing = _missing_lines(sections)
    if missing:
        parts.append("<div class='needs'><p>Not in this report:</p><ul>" + "".join(f"<li>{_inline(m)}</li>" for m in missing) + "</ul></div>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def to_markdown(title: str, intro: list[str], sections: list[Section]) -> str:
    lines = [f"# {title}", "", *(f"{line}\n" for line in intro)]
    for s in sections:
        if not s.shown:
            continue
        lines += [f"## {s.title}", ""]
        for p in s.parts:
            lines += [_part_md(p), ""]
    missing = _missing_lines(sections)
    if missing:
        lines += ["_Not in this report:_", "", *(f"- _{m}_" for m in missing), ""]
    return "\n".join(lines).rstrip() + "\n"


def images(sections: list[Section]) -> list[Image]:
    found: list[Image] = []
    for s in sections:
        for p in s.parts:
            if isinstance(p, Image):
                found.append(p)
            elif isinstance(p, Table):
                found += [c for row in p.rows for c in row if isinstance(c, Image)]
    return found


def write(out: Path, title: str, intro: list[str], sections: list[Section]) -> dict[str, object]:
    """Write the PNGs, report.md and report.html under `out`; return their paths."""
    pngs = images(sections)
    for img in pngs:
        with atomic.atomic_path(out / img.name) as tmp:
            tmp.write_bytes(img.png)
    md = atomic.write_text(out / "report.md", to_markdown(title, intro, sections))
    page = atomic.write_text(out / "report.html", to_html(title, intro, sections))
    return {"html": str(page), "markdown": str(md), "images": [str(out / img.name) for img in pngs]}
