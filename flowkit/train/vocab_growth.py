"""Growing a parent's text embedding when a child run's data hold new tokens (init-from).

Shape legend: V parent vocabulary size (ids, padding included), V' the child's, dt text dim.

F5-TTS fine-tunes that add characters are easy to get wrong (F5-TTS issues #863 and #554:
only the EMA copy's embedding was extended, or new characters silently became the
unknown id). Here the vocabulary is extended with every token of the child's training
texts that the parent lacks, appended after the old ids, and the text embedding of the
model *and* of the EMA grows by the same rows:

- old rows are copied unchanged, so old-vocabulary text gives the parent's outputs;
- each new row is the mean of the parent's token rows (ids 1..V-1, padding excluded): a
  neutral start that is "some character" rather than padding or noise.

The optimizer is fresh in an init-from run anyway (its moments would not fit the grown
table).

Languages grow the same way: a child whose data hold a language the parent lacks appends it
to the parent's language list (old ids unchanged), and each language embedding ``[L+1 c]``
(id 0 = unknown) of the model and the EMA gets a row per new language, a copy of the unknown
row: the new language starts where the parent was for speech with no language label.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

__all__ = ["INIT_RULE", "LANGUAGE_EMBEDDINGS", "LANGUAGE_INIT_RULE", "TEXT_EMBEDDING", "grow_language_embeddings",
           "grow_text_embedding"]

#: The state-dict key of the text embedding ``[V dt]`` (both archs of `flowkit.model.dit`).
TEXT_EMBEDDING = "text.embed.weight"
INIT_RULE = "mean of the parent's token rows (ids 1.., padding excluded); old rows unchanged"
#: The state-dict keys of the language embeddings ``[L+1 c]``: the global conditions' and the
#: duration head's (aligned text path); a model has those its config builds.
LANGUAGE_EMBEDDINGS = ("globals.language.weight", "duration.language.weight")
LANGUAGE_INIT_RULE = "a copy of the unknown language's row (id 0); old rows unchanged"


def grow_text_embedding(state: Mapping[str, torch.Tensor], new_size: int) -> dict[str, torch.Tensor]:
    """``state`` with its text embedding grown from ``[V dt]`` to ``[new_size dt]`` by `INIT_RULE`.

    Raises:
        ValueError: ``state`` has no text embedding, or ``new_size`` is smaller than ``V``.
    """
    if TEXT_EMBEDDING not in state:
        raise ValueError(f"the parent's weights have no {TEXT_EMBEDDING}")
    old = state[TEXT_EMBEDDING]
    if new_size < old.shape[0]:
        raise ValueError(f"cannot shrink the text embedding from {old.shape[0]} to {new_size} rows")
    fill = old[1:].mean(dim=0, keepdim=True) if old.shape[0] > 1 else torch.zeros_like(old[:1])
    grown = torch.cat([old, fill.expand(new_size - old.shape[0], -1)], dim=0).contiguous()
    return {**state, TEXT_EMBEDDING: grown}


def grow_language_embeddings(state: Mapping[str, torch.Tensor], n_languages: int) -> dict[str, torch.Tensor]:
    """``state`` with each of its `LANGUAGE_EMBEDDINGS` grown to ``n_languages + 1`` rows by
    `LANGUAGE_INIT_RULE`.

    Raises:
        ValueError: a table has more rows than ``n_languages + 1``.
    """
    out = dict(state)
    for key in LANGUAGE_EMBEDDINGS:
        if key not in out:
            continue
        old = out[key]
        if n_languages + 1 < old.shape[0]:
            raise ValueError(f"cannot shrink {key} from {old.shape[0]} to {n_languages + 1} rows")
        out[key] = torch.cat([old, old[:1].expand(n_languages + 1 - old.shape[0], -1)], dim=0).contiguous()
    return out
