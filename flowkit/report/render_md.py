"""Markdown rendering of a report `Document`.

Images and audio are files next to the markdown (``<files_dir>/<name>``), linked
relatively, so the report reads on GitHub or in any markdown viewer.
"""

from __future__ import annotations

from flowkit.report.document import Code, Document, Facts, Figure, Note, SampleBlock, Table

__all__ = ["render_markdown"]


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(block: Table) -> list[str]:
    lines = ["| " + " | ".join(_cell(h) for h in block.header) + " |", "|" + "---|" * len(block.header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in block.rows]
    return lines


def render_markdown(doc: Document, files_dir: str = "report_files") -> str:
    """The report as markdown; figures and audio are linked from ``files_dir`` (relative)."""
    lines = [f"# {doc.title}", ""]
    for section in doc.sections:
        lines += [f"## {section.title}", ""]
        for block in section.blocks:
            if isinstance(block, Facts):
                lines += [f"- {label}: {value}" for label, value in block.items]
            elif isinstance(block, Table):
                lines += _table(block)
            elif isinstance(block, Figure):
                lines.append(f"![{block.title}]({files_dir}/{block.name})")
            elif isinstance(block, Code):
                fence = "````" if "```" in block.text else "```"
                lines += [f"{fence}{block.language}", block.text, fence]
            elif isinstance(block, Note):
                lines.append(f"_{block.text}_")
            elif isinstance(block, SampleBlock):
                lines += [f"### {block.title}", "", block.caption, ""]
                lines += [f"![{f.title}]({files_dir}/{f.name})" for f in block.figures]
                lines.append("")
                lines += [f"- {label}: [{a.name}]({files_dir}/{a.name})" for label, a in block.audios]
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"
