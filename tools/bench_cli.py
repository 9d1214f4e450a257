"""Start-up time of `flowkit --help` next to a bare `python -c pass`, median of several runs.

Target: under 0.3 s more than the bare interpreter.

    .venv/bin/python tools/bench_cli.py [--repeats 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time


def wall(cmd: list[str], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    bare = wall([sys.executable, "-c", "pass"], args.repeats)
    cli = wall([sys.executable, "-m", "flowkit", "--help"], args.repeats)
    sub = wall([sys.executable, "-m", "flowkit", "train", "--help"], args.repeats)
    b, c, s = statistics.median(bare), statistics.median(cli), statistics.median(sub)
    print(f"python -c pass        median {b * 1000:7.1f} ms")
    print(f"flowkit --help        median {c * 1000:7.1f} ms   (+{(c - b) * 1000:.1f} ms, target < +300 ms)")
    print(f"flowkit train --help  median {s * 1000:7.1f} ms   (+{(s - b) * 1000:.1f} ms)")
    print(f"ratio --help / bare: {c / b:.2f}x over {args.repeats} runs each")


if __name__ == "__main__":
    main()
