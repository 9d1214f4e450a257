"""Regenerate the parameter table of docs/models.md from the presets.

python tools/model_table.py            # rewrite the table in place
python tools/model_table.py --check    # exit 1 when the table is stale
"""

from __future__ import annotations

import sys
from pathlib import Path

from flowkit.model.sizes import parameter_table

DOC = Path(__file__).resolve().parents[1] / "docs" / "models.md"
BEGIN, END = "<!-- params:begin -->", "<!-- params:end -->"


def render(text: str) -> str:
    """``text`` with the block between the markers replaced by the current table."""
    before, rest = text.split(BEGIN, 1)
    _, after = rest.split(END, 1)
    return f"{before}{BEGIN}\n{parameter_table()}\n{END}{after}"


def main() -> int:
    text = DOC.read_text(encoding="utf-8")
    new = render(text)
    if "--check" in sys.argv[1:]:
        if new != text:
            print(f"{DOC} is stale: run python tools/model_table.py")
            return 1
        return 0
    if new != text:
        from flowkit.io import atomic_write_text

        atomic_write_text(DOC, new)
    print(parameter_table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
