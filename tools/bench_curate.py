"""Where `flowkit curate`'s time goes: CPU seconds per clip of each criterion, per language,
with Whisper's packing and DNSMOS's screen on (the defaults) and off, on one thread.

    python tools/bench_curate.py SOURCE [--clips 48] [--languages en es]

For each language, the first ``--clips`` clips of SOURCE (anything ``flowkit curate``
reads) are cut into the chunks a curation measures (`flowkit.curation.measure.chunks`) and
each criterion measures every chunk as a curation worker does (``measure_many`` where it
has one); the judges are loaded and warmed on the first chunk before timing. Prints CPU
seconds per clip (``time.process_time``) for both settings, their ratio, the share of clips
the DNSMOS screen sends to the model, and x real time of one thread for all criteria
together (seconds of audio per CPU second; a curation with W workers on W idle cores runs
about W times that). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from flowkit import registry
from flowkit.curation.clips import load_clip, read_source
from flowkit.curation.measure import chunks
from flowkit.curation.run import DEFAULT_CRITERIA


def _criteria(fast: bool) -> dict:
    registry.load_plugins()
    out = {name: registry.build("criterion", name) for name in DEFAULT_CRITERIA}
    if not fast:
        out["transcript_cer"].pack_gap_s = None
        out["dnsmos"].screen_db = None
    return out


def _cpu_per_clip(criteria: dict, groups: list[list]) -> tuple[dict[str, float], float]:
    """CPU seconds per clip of each criterion over ``groups`` (lists of clips), and the
    share of clips DNSMOS scored."""
    spent = dict.fromkeys(criteria, 0.0)
    scored = n = 0
    for clips in groups:
        for name, criterion in criteria.items():
            t0 = time.process_time()
            if hasattr(criterion, "measure_many"):
                values = criterion.measure_many(clips)
            else:
                values = [criterion.measure(c) for c in clips]
            spent[name] += time.process_time() - t0
            if name == "dnsmos":
                scored += sum(v.get("dnsmos_bak") is not None for v in values)
        n += len(clips)
    return {k: v / max(n, 1) for k, v in spent.items()}, scored / max(n, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("--clips", type=int, default=48)
    parser.add_argument("--languages", nargs="+", default=["en", "es"])
    args = parser.parse_args()
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    items, _ = read_source([args.source])
    with threadpool_limits(1):
        for language in args.languages:
            mine = [i for i in items if i.language == language][: args.clips]
            if not mine:
                print(f"{language}: no clips")
                continue
            groups = [[load_clip(i) for i in chunk] for chunk in chunks(mine)]
            audio_s = sum(c.audio.size / c.sample_rate for g in groups for c in g)
            per_clip_s = audio_s / sum(len(g) for g in groups)
            rows = {}
            for fast in (False, True):
                criteria = _criteria(fast)
                _cpu_per_clip(criteria, groups[:1])  # load and warm the judges
                rows[fast] = _cpu_per_clip(criteria, groups)
            print(f"\n{language}: {sum(len(g) for g in groups)} clips, mean {per_clip_s:.2f} s "
                  f"({len(groups)} chunks); CPU s per clip on one thread")
            print(f"{'criterion':18s} {'alone, all':>11s} {'packed, screen':>15s} {'ratio':>6s}")
            for name in DEFAULT_CRITERIA:
                slow, fast = rows[False][0][name], rows[True][0][name]
                print(f"{name:18s} {slow:11.3f} {fast:15.3f} {slow / max(fast, 1e-9):6.1f}")
            slow, fast = sum(rows[False][0].values()), sum(rows[True][0].values())
            print(f"{'all':18s} {slow:11.3f} {fast:15.3f} {slow / max(fast, 1e-9):6.1f}")
            print(f"x real time of one thread: {per_clip_s / slow:.1f} -> {per_clip_s / fast:.1f}; "
                  f"DNSMOS scored {rows[True][1]:.0%} of the clips behind the screen")


if __name__ == "__main__":
    main()
