"""``speaker.resemblyzer`` with the GE2E weights its wheel ships (``flowkit[eval]``, no
download): on real recordings of the bundled demo clips it ranks the same speaker above
every other speaker; embeddings are L2-normalised; silence is handled (the wheel and a missing package:
test_judge_packages.py)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from flowkit import registry

#: 3 clips of each of the 4 demo speakers, real 16 kHz recordings: allison's English
#: sentences, and the 3 longest clips of june (French), carlo (Italian) and maxim (Russian).
ALLISON = ("allison_en_conf-muted", "allison_en_confbridge-conf-end", "allison_en_followme-no-recording")
OTHERS = ("june", "carlo", "maxim")


@pytest.fixture(scope="module")
def judge():
    registry.load_plugins()
    return registry.build("speaker", "resemblyzer")


@pytest.fixture(scope="module")
def voices() -> dict[str, list[tuple[np.ndarray, int]]]:
    """3 clips per speaker (``ALLISON``, else the speaker's 3 longest clips): [(audio, Hz)]."""
    import soundfile as sf

    from flowkit.data.demo import demo_clips_path

    root = demo_clips_path()
    rows = [line.split("|") for line in (root / "metadata.csv").read_text(encoding="utf-8").splitlines()]
    out = {"allison": [sf.read(str(root / "wavs" / f"{i}.flac"), dtype="float32") for i in ALLISON]}
    for speaker in OTHERS:
        mine = [r[0] for r in rows if r[2] == speaker]
        ids = sorted(mine, key=lambda i: (-sf.info(str(root / "wavs" / f"{i}.flac")).frames, i))[:3]
        out[speaker] = [sf.read(str(root / "wavs" / f"{i}.flac"), dtype="float32") for i in ids]
    return out


def test_same_speaker_ranks_above_every_other_speaker(judge, voices) -> None:
    emb = [(s, judge.embed(a, sr)) for s, clips in voices.items() for a, sr in clips]
    for k, (speaker, e) in enumerate(emb):
        # each clip's nearest other clip is its own speaker's (measured: the closest call is
        # allison's, 0.708 to her own farthest clip against 0.695 to june's nearest)
        scores = sorted(((float(e @ f), t) for j, (t, f) in enumerate(emb) if j != k), reverse=True)
        assert scores[0][1] == speaker, (speaker, scores[:3])
    for speaker in voices:
        mine = [e for s, e in emb if s == speaker]
        same = np.mean([a @ b for a, b in itertools.combinations(mine, 2)])
        for other in voices:
            if other != speaker:
                theirs = np.mean([a @ b for a in mine for s, b in emb if s == other])
                # measured: same-speaker means 0.75-0.85, to another speaker 0.45-0.65; the
                # smallest gap, allison's, 0.16 on average
                assert same - theirs > 0.08, (speaker, other, same, theirs)


def test_embeddings_are_unit_vectors_and_similarity_is_their_cosine(judge, voices) -> None:
    (a, sr), (b, _) = voices["allison"][:2]
    ea, eb = judge.embed(a, sr), judge.embed(b, sr)
    assert ea.shape == (256,) and ea.dtype == np.float32
    assert np.linalg.norm(ea) == pytest.approx(1.0, abs=1e-5)  # float32 norm of 256 values
    assert judge.similarity(a, sr, b, sr) == pytest.approx(float(ea @ eb), abs=1e-6)
    assert judge.similarity(a, sr, a, sr) == pytest.approx(1.0, abs=1e-6)


def test_any_rate_any_level(judge, voices) -> None:
    import soxr

    a, sr = voices["allison"][0]
    up = soxr.resample(a, sr, 22050).astype(np.float32)
    # the same clip at 22.05 kHz, and 4x louder than full scale (scaled, never clipped)
    assert judge.similarity(a, sr, up, 22050) > 0.95
    assert judge.similarity(a, sr, 4.0 * a, sr) > 0.99


def test_silence_embeds_to_zeros(judge, voices) -> None:
    a, sr = voices["allison"][0]
    silent = np.zeros(sr, np.float32)
    assert not judge.embed(silent, sr).any()
    assert judge.similarity(silent, sr, a, sr) == 0.0
    assert not judge.embed(np.zeros(0, np.float32), sr).any()
