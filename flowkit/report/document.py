"""The report as a small document tree that both renderers (markdown, HTML) walk.

A `Document` is a title and sections; a section holds blocks: facts (label: value
lines), tables, images (PNG bytes), code (the operative config) and audio samples. The
builders decide what to say once; `render_md` and `render_html` only decide how.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

__all__ = ["Audio", "Block", "Code", "Document", "Facts", "Figure", "Note", "SampleBlock", "Section", "Table"]


@attrs.frozen
class Facts:
    """``label: value`` lines."""

    items: Sequence[tuple[str, str]]


@attrs.frozen
class Table:
    """A table: column titles and rows of cell text; ``sortable``: the HTML sorts it by a
    column when its title is clicked (numbers as numbers, ``-`` last)."""

    header: Sequence[str]
    rows: Sequence[Sequence[str]]
    sortable: bool = False


@attrs.frozen
class Figure:
    """A PNG image; ``name`` is its file name next to report.md (``report_files/<name>``)."""

    title: str
    png: bytes
    name: str


@attrs.frozen
class Code:
    """A verbatim block (the operative config); ``language`` tags the markdown fence."""

    text: str
    language: str = ""


@attrs.frozen
class Note:
    """A remark in place of missing content ("No checkpoint written yet.")."""

    text: str


@attrs.frozen
class Audio:
    """A WAV file; ``name`` as for `Figure`."""

    wav: bytes
    name: str


@attrs.frozen
class SampleBlock:
    """One synthesised validation item: generated vs ground truth, with provenance."""

    title: str
    caption: str  # text, weights (EMA/raw) and step that made it
    figures: Sequence[Figure]
    audios: Sequence[tuple[str, Audio]]  # (label, audio)


Block = Facts | Table | Figure | Code | Note | SampleBlock


@attrs.frozen
class Section:
    """A titled run of blocks (one ``##`` heading)."""

    title: str
    blocks: Sequence[Block]


@attrs.frozen
class Document:
    """The whole report: a title and its sections."""

    title: str
    sections: Sequence[Section]

    def figures(self) -> list[Figure]:
        """Every figure, sample figures included (what report_files/ must hold)."""
        out: list[Figure] = []
        for section in self.sections:
            for block in section.blocks:
                if isinstance(block, Figure):
                    out.append(block)
                elif isinstance(block, SampleBlock):
                    out.extend(block.figures)
        return out

    def audios(self) -> list[Audio]:
        """Every audio sample (what report_files/ must hold besides the figures)."""
        return [a for s in self.sections for b in s.blocks if isinstance(b, SampleBlock) for _, a in b.audios]
