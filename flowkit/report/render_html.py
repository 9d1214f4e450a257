"""Self-contained HTML rendering of a report `Document`.

Every image is a ``data:image/png;base64`` URI and every sample a ``data:audio/wav;base64``
URI inside ``<audio controls>``, and the style sheet is inline: the single file opens
offline, can be mailed or attached to an issue, and needs no server.
"""

from __future__ import annotations

import base64
import html

from flowkit.report.document import Code, Document, Facts, Figure, Note, SampleBlock, Table

__all__ = ["render_html"]

_STYLE = """
body { font-family: system-ui, -apple-system, Segoe UI, sans-serif; margin: 2em auto; max-width: 1100px;
       color: #1d1d1f; padding: 0 1em; }
h1 { border-bottom: 2px solid #444; padding-bottom: .2em; }
h2 { margin-top: 1.8em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: .6em 0; font-size: 90%; }
th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: left; vertical-align: top; }
th { background: #f0f0f3; }
dl.facts { display: grid; grid-template-columns: max-content auto; gap: .15em 1em; }
dl.facts dt { font-weight: 600; } dl.facts dd { margin: 0; }
pre { background: #f6f6f8; padding: .8em; overflow-x: auto; font-size: 85%; }
/* two plots a row on a wide screen, one on a narrow one; each plot carries its own title */
figure { display: inline-block; vertical-align: top; width: 49%; min-width: 420px; margin: .4em 0; }
figure img { max-width: 100%; height: auto; }
.sample figure { width: 100%; max-width: 900px; }
.sample { border: 1px solid #ddd; border-radius: 6px; padding: .6em 1em; margin: 1em 0; }
.note { color: #666; font-style: italic; }
table.sortable th { cursor: pointer; user-select: none; }
table.sortable th:after { content: " \\2195"; color: #999; font-size: 80%; }
table.sortable th.asc:after { content: " \\2191"; color: #333; } \
table.sortable th.desc:after { content: " \\2193"; color: #333; }
.wide { overflow-x: auto; } table.sortable { font-size: 85%; } table.sortable td:first-child { white-space: nowrap; }
audio { vertical-align: middle; margin: .2em .6em; }
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def png_size(png: bytes) -> tuple[int, int]:
    """``(width, height)`` in pixels from a PNG's IHDR chunk."""
    if png[:8] != b"\x89PNG\r\n\x1a\n" or len(png) < 24:
        raise ValueError("not a PNG")
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def _img(figure: Figure) -> str:
    """An image shown at its own pixel size (never scaled up, so never blurred), narrower on small screens."""
    data = base64.b64encode(figure.png).decode("ascii")
    width, height = png_size(figure.png)
    return (
        f'<figure><img alt="{_e(figure.title)}" title="{_e(figure.title)}" width="{width}" height="{height}" '
        f'src="data:image/png;base64,{data}"></figure>'
    )


# Sorting a table by the clicked column title: numbers as numbers ("1,234", "85 s" and
# "1.2 min" read by their leading number, in seconds for times), text otherwise, "-" last;
# a second click reverses. Plain DOM calls, no library: the page stays offline.
_SORT_JS = """
function fkValue(text) {
  var t = text.trim(); if (t === "-" || t === "") return null;
  var m = t.replace(/,/g, "").match(/^(-?[0-9.]+(?:e[-+]?[0-9]+)?)\\s*(s|min|h)?\\b/i);
  if (!m) return t.toLowerCase();
  var scale = {s: 1, min: 60, h: 3600}[(m[2] || "").toLowerCase()] || 1;
  return parseFloat(m[1]) * scale;
}
function fkSort(th) {
  var table = th.closest("table"), body = table.tBodies[0], col = th.cellIndex;
  var up = !th.classList.contains("asc");
  Array.prototype.forEach.call(th.parentNode.children, function (h) { h.classList.remove("asc", "desc"); });
  th.classList.add(up ? "asc" : "desc");
  var rows = Array.prototype.slice.call(body.rows);
  rows.sort(function (a, b) {
    var x = fkValue(a.cells[col].textContent), y = fkValue(b.cells[col].textContent);
    if (x === null || y === null) return (x === null) - (y === null);
    if (typeof x !== typeof y) { x = String(x); y = String(y); }
    return (x < y ? -1 : x > y ? 1 : 0) * (up ? 1 : -1);
  });
  rows.forEach(function (r) { body.appendChild(r); });
}
document.querySelectorAll("table.sortable th").forEach(function (th) {
  th.title = "sort by " + th.textContent; th.addEventListener("click", function () { fkSort(th); });
});
"""


def _table(block: Table) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in block.header)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in block.rows)
    if block.sortable:
        return (f'<div class="wide"><table class="sortable"><thead><tr>{head}</tr></thead>'
                f'<tbody>{body}</tbody></table></div>')
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _sample(block: SampleBlock) -> str:
    parts = [f'<div class="sample"><h3>{_e(block.title)}</h3><p>{_e(block.caption)}</p>']
    parts += [_img(f) for f in block.figures]
    for label, audio in block.audios:
        data = base64.b64encode(audio.wav).decode("ascii")
        parts.append(f'<div>{_e(label)}: <audio controls preload="metadata" '
                     f'src="data:audio/wav;base64,{data}"></audio></div>')
    parts.append("</div>")
    return "".join(parts)


def render_html(doc: Document) -> str:
    """The report as one HTML page with every image and audio embedded."""
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_e(doc.title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{_e(doc.title)}</h1>",
    ]
    for section in doc.sections:
        out.append(f"<h2>{_e(section.title)}</h2>")
        for block in section.blocks:
            if isinstance(block, Facts):
                items = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in block.items)
                out.append(f'<dl class="facts">{items}</dl>')
            elif isinstance(block, Table):
                out.append(_table(block))
            elif isinstance(block, Figure):
                out.append(_img(block))
            elif isinstance(block, Code):
                out.append(f"<pre><code>{_e(block.text)}</code></pre>")
            elif isinstance(block, Note):
                out.append(f'<p class="note">{_e(block.text)}</p>')
            elif isinstance(block, SampleBlock):
                out.append(_sample(block))
    if any(isinstance(b, Table) and b.sortable for section in doc.sections for b in section.blocks):
        out.append(f"<script>{_SORT_JS}</script>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
