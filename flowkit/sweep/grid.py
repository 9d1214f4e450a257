"""Sweep points: the gin bindings of each run, from ``--grid``, ``--random`` and ``--seeds``.

A grid axis is one ``--grid "KEY=[v1, v2, ...]"``: a gin binding key (``Trainer.lr``,
``schedule.cosine_vpred.sigma_min``, ``train/Trainer.lr``) and a list of gin values kept
as the text the user wrote (``2e-3``, ``@schedule.cosine_vpred()``, ``'cosine'``,
``%MACRO``), so a point's bindings are ordinary ``-b`` statements: ``Trainer.lr = 2e-3``.
The list is split at its top-level commas with Python's tokenizer (gin's value syntax is
Python's, plus ``@`` references and ``%`` macros, which tokenize as operators); whether
each value means something is gin's call, checked when every point is parsed
(`flowkit.sweep.check`).

Points: the cartesian product of the axes (the first axis varies slowest), or ``n``
distinct points drawn from it with a seeded generator; ``--seeds K`` repeats every point
with ``Trainer.seed = 0 .. K-1``.
"""

from __future__ import annotations

import io
import itertools
import random
import re
import tokenize
from collections.abc import Sequence

import attrs

from flowkit.errors import ConfigError

__all__ = ["SEED_KEY", "Axis", "Point", "grid_points", "parse_axis", "random_points", "with_seeds"]

#: The binding ``--seeds K`` sweeps.
SEED_KEY = "Trainer.seed"
_KEY = re.compile(r"^(?:[A-Za-z_][\w.]*/)*[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+$|^[A-Z_][A-Z0-9_]*$")


@attrs.frozen
class Axis:
    """One swept binding: its key and its values as gin text."""

    key: str
    values: tuple[str, ...]


@attrs.frozen
class Point:
    """One run of a sweep: ``((key, value text), ...)`` in axis order."""

    bindings: tuple[tuple[str, str], ...]

    @property
    def lines(self) -> list[str]:
        """The point's ``-b`` statements, e.g. ``["Trainer.lr = 2e-3"]``."""
        return [f"{k} = {v}" for k, v in self.bindings]


def _split_list(text: str) -> list[str] | None:
    """The top-level items of a bracketed list ``[a, b(c, d), 'e,f']``; None if not a list."""
    text = text.strip()
    if not (text.startswith("[") and text.endswith("]")):
        return None
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None
    depth, items, start = 0, [], None
    closed = False
    for tok in tokens:
        if tok.type in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.COMMENT):
            continue
        if closed:
            return None  # text after the closing bracket: `[1, 2] 3`
        offset = tok.start[1]
        if tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
            if depth == 1:
                start = offset + 1
                continue
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
            if depth == 0:
                items.append(text[start:offset])
                closed = True
                continue
        elif tok.type == tokenize.OP and tok.string == "," and depth == 1:
            items.append(text[start:offset])
            start = offset + 1
    if not closed:
        return None
    items = [i.strip() for i in items]
    if items and items[-1] == "":  # a trailing comma
        items.pop()
    return items


def parse_axis(spec: str) -> Axis:
    """One ``--grid`` option: ``"KEY=[v1, v2, ...]"``.

    Raises:
        ConfigError: no ``=``, a key that is not a gin binding key, a value that is not a
            bracketed list, an empty value, or a value given twice; the message quotes the
            option and shows the form.
    """
    form = 'e.g. --grid "Trainer.lr=[1e-3, 2e-3]"'
    key, sep, rest = spec.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"--grid {spec!r}: give KEY=[VALUES], {form}")
    if not _KEY.match(key):
        raise ConfigError(f"--grid {spec!r}: {key!r} is not a gin binding key (configurable.parameter or MACRO), "
                          f"{form}")
    values = _split_list(rest)
    if values is None:
        raise ConfigError(f"--grid {spec!r}: the values must be one bracketed list of gin values, {form}")
    if not values:
        raise ConfigError(f"--grid {spec!r}: the list is empty; give at least one value, {form}")
    if "" in values:
        raise ConfigError(f"--grid {spec!r}: an empty value between two commas; remove the extra comma")
    seen: set[str] = set()
    for v in values:
        canon = re.sub(r"\s+", "", v)
        if canon in seen:
            raise ConfigError(f"--grid {spec!r}: the value {v} is given twice; give each value once")
        seen.add(canon)
    return Axis(key, tuple(values))


def _check_axes(axes: Sequence[Axis]) -> None:
    keys = [a.key for a in axes]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise ConfigError(f"--grid {twice[0]} is given twice; give one --grid per binding with all its values")


def grid_points(axes: Sequence[Axis]) -> list[Point]:
    """The cartesian product of ``axes``, the first axis varying slowest.

    Raises:
        ConfigError: a key swept by two ``--grid`` options.
    """
    _check_axes(axes)
    combos = itertools.product(*(a.values for a in axes))
    return [Point(tuple(zip((a.key for a in axes), combo, strict=True))) for combo in combos]


def random_points(axes: Sequence[Axis], n: int, seed: int) -> list[Point]:
    """``n`` distinct points of the grid, drawn uniformly with ``random.Random(seed)``.

    The draw depends only on the axes, ``n`` and ``seed``: the same command draws the
    same points. Raises ConfigError when ``n`` exceeds the grid's size.
    """
    everything = grid_points(axes)
    if n > len(everything):
        raise ConfigError(
            f"--random {n} asks for more points than the grid has ({len(everything)}); give --random {len(everything)} "
            "or fewer, or drop --random for the whole grid"
        )
    picks = random.Random(seed).sample(range(len(everything)), n)
    return [everything[i] for i in picks]


def with_seeds(points: Sequence[Point], seeds: int) -> list[Point]:
    """Each point repeated with ``Trainer.seed = 0 .. seeds-1`` (seed varying fastest).

    Raises:
        ConfigError: the grid already sweeps ``Trainer.seed``.
    """
    if seeds <= 1:
        return list(points)
    if any(k == SEED_KEY for p in points for k, _ in p.bindings):
        raise ConfigError(f"--seeds {seeds} with --grid {SEED_KEY}=[...]: give one of the two")
    return [Point((*p.bindings, (SEED_KEY, str(s)))) for p in points for s in range(seeds)]
