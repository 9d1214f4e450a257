"""Every command in a ```bash block of README.md and docs/*.md is run, so the docs stay true.

Each page runs in its own sandbox (a temporary folder with ``gin``, ``plugins``,
``tools``, ``flowkit`` (the bundled demo clips) and ``.venv`` linked from the repository,
and ``../shared`` linked when the shared corpus is next to the clone), its commands in
order, so later commands see what earlier ones made.
Runs are cut short: ``train``/``init-from`` get ``--steps 2`` and quick evaluation and
saving, ``resume`` gets ``--steps 3``. The few commands not run here are listed in
``NOT_RUN`` with the reason and the test that covers them instead.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

NOT_RUN = {
    "make test": "it is the test suite itself (CI runs it through .ci/run)",
    "make demo": "the full demo; tests/docs/test_demo.py runs its pipeline (tools/demo.sh) at a smoke test's size",
    "bash tools/setup.sh": "the suite already runs inside the environment it sets up",
}
#: multi-process launches need several GPUs or nodes as written; tests/distributed/ runs
#: the same code paths with 2 CPU processes on gloo
MULTI_PROCESS = ("torchrun", "torch.distributed.run", "--nproc")
SHORT = ["-b", "Trainer.eval_every = 1", "-b", "Trainer.save_every = 1", "-b", "Trainer.eval_batches = 1",
         "-b", "Trainer.log_every = 1"]


def commands(page: Path) -> list[str]:
    """The commands of a page's ```bash blocks, continuation lines joined."""
    out: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S):
        pending = ""
        for line in block.splitlines():
            line = line.rstrip()
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            line = (pending + line).strip()
            pending = ""
            if line and not line.startswith("#"):
                out.append(line)
    return out


def shorten(argv: list[str]) -> list[str]:
    """Cut a training command short without changing what it exercises."""
    if len(argv) < 2:
        return argv
    tool = Path(argv[0]).name
    if tool != "flowkit":
        return argv
    sub = argv[1]
    if argv[1:3] == ["align", "train"]:  # capped at 200 steps (~1 min): an aligner of a few steps aligns no
        return [*_without_steps(argv), "--steps", "200"]  # segment honestly, and `align write` then writes nothing
    if sub in ("train", "init-from", "resume"):
        cleaned = []
        skip = False
        for a in argv:
            if skip:
                skip = False
                continue
            if a == "--steps":
                skip = True
                continue
            cleaned.append(a)
        steps = "3" if sub == "resume" else "2"
        extra = [] if sub == "resume" else SHORT
        return [*cleaned, "--steps", steps, *extra]
    if sub == "sweep":  # every point a short run, as train's
        return [*argv, "-b", "Trainer.steps = 2", *SHORT]
    if sub == "report" and "--samples" in argv:
        i = argv.index("--samples")
        return [*argv[:i + 1], "1", *argv[i + 2:]]
    return argv


def _without_steps(argv: list[str]) -> list[str]:
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--steps":
            skip = True
        else:
            out.append(a)
    return out


def sandbox(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    for name in ("gin", "plugins", ".venv", "tools", "flowkit"):
        (work / name).symlink_to(REPO / name)
    if SHARED.is_dir():
        (tmp_path / "shared").symlink_to(SHARED)
    return work


def page_id(page: Path) -> str:
    return str(page.relative_to(REPO))


@pytest.mark.parametrize("page", [p for p in PAGES if commands(p)], ids=page_id)
def test_page_commands_run(page, tmp_path):
    cmds = commands(page)
    needs_corpus = any("../shared" in c for c in cmds)
    if needs_corpus and not (SHARED / "data" / "asterisk-5voice").is_dir():
        pytest.skip(f"{page_id(page)} uses ../shared/data/asterisk-5voice, not next to this clone")
    work = sandbox(tmp_path)
    # docs write both `.venv/bin/flowkit` and plain `flowkit` (an activated venv)
    path = f"{work / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, "COLUMNS": "120", "PYTHONUNBUFFERED": "1", "PATH": path}
    runnable = [c for c in cmds if runnable_here(c)]
    if not runnable:
        pytest.skip(f"every command of {page_id(page)} launches several processes (tests/distributed/ covers them)")
    for cmd in runnable:
        argv = shorten(shlex.split(cmd, comments=True))
        out = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, (f"{page_id(page)}: `{cmd}` exited {out.returncode}\n"
                                     f"{out.stdout[-2000:]}\n{out.stderr[-2000:]}")


def runnable_here(cmd: str) -> bool:
    """False for the commands in `NOT_RUN` and for multi-process launches."""
    bare = cmd.removeprefix(".venv/bin/")
    return not any(bare.startswith(p) for p in NOT_RUN) and not any(m in cmd for m in MULTI_PROCESS)


def test_commands_join_continuations_and_skip_comments(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("text\n```bash\n# a comment\nflowkit report a \\\n  --out b\n```\n```\nnot bash\n```\n")
    assert shlex.split(commands(page)[0]) == ["flowkit", "report", "a", "--out", "b"]
    assert len(commands(page)) == 1


def test_shorten_caps_training_and_keeps_the_rest():
    argv = shorten([".venv/bin/flowkit", "train", "gin/x.gin", "--steps", "200", "--out", "r"])
    assert argv[:5] == [".venv/bin/flowkit", "train", "gin/x.gin", "--out", "r"]
    assert argv[5:7] == ["--steps", "2"]
    assert shorten([".venv/bin/flowkit", "resume", "r"]) == [".venv/bin/flowkit", "resume", "r", "--steps", "3"]
    assert shorten(["ls", "-l"]) == ["ls", "-l"]


@pytest.mark.parametrize("name", ["README.md", "docs/quickstart.md"])
def test_first_hour_pages_need_only_the_clone(name):
    """README's everyday commands and the quickstart run on a fresh clone: prepare -> train ->
    init-from -> report on the bundled clips, never on ../shared."""
    cmds = commands(REPO / name)
    assert [c for c in cmds if "../shared" in c] == []
    sub = [shlex.split(c)[1] for c in cmds if shlex.split(c)[0].endswith("flowkit")]
    assert any("prepare flowkit/demo/clips" in c for c in cmds)
    for step in ("prepare", "train", "report"):
        assert step in sub, f"{name} lacks a `flowkit {step}` step"
    init_from = [c for c in cmds if " init-from " in f" {c} " or "--init-from" in c]
    assert init_from, f"{name} lacks an init-from step (`flowkit train ... --init-from RUN`)"


def test_outputs_of_documented_commands_are_git_ignored(tmp_path):
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    paths = ["data/demo.zarr/zarr.json", "reports/e12-vs-e13/report.html", "hello.wav", "runs/e12/config.gin"]
    out = subprocess.run(["git", "check-ignore", "--no-index", *paths], cwd=REPO, capture_output=True, text=True)
    assert sorted(out.stdout.split()) == sorted(paths)
