"""String columns (blob + offsets) answer exactly as the decoded Python strings do."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from flowkit.data.columns import StringColumn, categorical

SAMPLES = ["", " ", "a", "\u00a0", " x", "é", "привет", "\u3000 ", "日本", "\t\n", "b c", "\u2003y", "ab"]


def column(values: list[str]) -> StringColumn:
    encoded = [v.encode("utf-8") for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    return StringColumn(np.frombuffer(b"".join(encoded), dtype=np.uint8), offsets)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(SAMPLES), st.text(alphabet=st.characters(exclude_categories=("Cs",),
                                                                                    exclude_characters="\x00"),
                                                                max_size=6)), max_size=30))
def test_column_equals_python_strings(values):
    col = column(values)
    assert len(col) == len(values) and col.tolist() == values and list(col) == values
    assert [col[i] for i in range(len(values))] == values
    assert col.char_lengths().tolist() == [len(v) for v in values]
    assert col.blank().tolist() == [not v.strip() for v in values]
    names, codes = categorical(col)
    assert [names[c] for c in codes.tolist()] == values and len(names) == len(set(values))
