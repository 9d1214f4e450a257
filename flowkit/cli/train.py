"""``flowkit train``, ``flowkit resume`` and ``flowkit init-from``: thin wrappers over
`flowkit.train.run`. Only typer, pathlib and typing are imported here; torch, gin and
the data stack load inside the command bodies so ``--help`` stays fast.

Exit codes (docs/cli.md): 0 finished, 1 other error, 2 config, 3 data, 4 resume or
checkpoint refused, 5 training stopped (non-finite loss, full disk, busy run directory),
130 stopped by Ctrl-C or SIGTERM after writing a checkpoint (``flowkit resume`` continues).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

EXIT_CODES = (
    "Exit codes: 0 finished; 1 error; 2 config; 3 data; 4 resume/checkpoint refused; "
    "5 training stopped (non-finite loss, disk full, run directory busy); "
    "130 stopped by Ctrl-C/SIGTERM after saving a checkpoint (continue with flowkit resume)."
)

_Bindings = Annotated[
    list[str] | None,
    typer.Option("-b", "--binding", help="A gin binding such as 'Trainer.lr = 1e-4', applied last; repeatable."),
]
_Data = Annotated[
    list[Path] | None,
    typer.Option("--data", help="A latent store (zarr) to train on; repeatable. Default: Trainer.data, else the "
                 "bundled demo store."),
]
_Out = Annotated[Path | None, typer.Option("--out", help="Run directory. Default: runs/<config stem>-<timestamp>.")]
_Steps = Annotated[int | None, typer.Option("--steps", help="Optimizer updates in total (sets Trainer.steps).", min=1)]
_Device = Annotated[str, typer.Option("--device", help="cpu, cuda, cuda:N or auto (CUDA when available).")]
_Nproc = Annotated[
    int | None,
    typer.Option(
        "--nproc",
        help="Train with N processes on this machine (one per GPU): re-runs this command under torchrun "
        "(python -m torch.distributed.run --standalone --nproc-per-node N). Several machines: docs/distributed.md.",
        min=1,
    ),
]


def _under_torchrun(nproc: int | None) -> None:
    """With ``--nproc N > 1``, replace this process by torchrun running the same command
    without ``--nproc`` (flowkit manages no processes itself); returns only when N <= 1."""
    import os
    import sys

    if nproc is None or nproc <= 1:
        return
    if "WORLD_SIZE" in os.environ:
        from flowkit.errors import ConfigError

        raise ConfigError("--nproc given to a process torchrun already started; "
                          "drop --nproc (torchrun sets the world size)")
    args, skip = [], False
    for arg in sys.argv[1:]:
        if skip:
            skip = False
        elif arg == "--nproc":
            skip = True
        elif not arg.startswith("--nproc="):
            args.append(arg)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
               "-m", "flowkit", *args]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, command)


def _finish(outcome: object) -> None:
    from flowkit.train.run import RunOutcome

    assert isinstance(outcome, RunOutcome)
    if outcome.interrupted:
        from flowkit.console import err_console

        err_console.print(
            f"stopped at step {outcome.step}; the checkpoint is saved. Continue with: "
            f"flowkit resume {outcome.run_dir}", markup=False, highlight=False, soft_wrap=True,
        )
        raise typer.Exit(130)


_Configs = Annotated[
    list[Path],
    typer.Argument(
        help="The experiment's gin file(s), parsed in order so later ones override earlier ones "
        "(e.g. gin/e12_cross_prompt.gin gin/cpu.gin); includes resolve relative to each file."
    ),
]


def _refuse_aligner_config(config: list[Path]) -> None:
    """An aligner experiment (it binds ``AlignRun``) given to ``flowkit train`` would train a
    default DiT; it is refused with the command that runs it."""
    import re

    from flowkit.config import resolve_config_file
    from flowkit.errors import ConfigError, FlowkitError

    for name in config:
        try:
            text = resolve_config_file(name).read_text(encoding="utf-8")
        except (FlowkitError, OSError, UnicodeError):  # the parse reports a missing or unreadable file
            continue
        if re.search(r"^\s*AlignRun\.", text, re.MULTILINE):
            raise ConfigError(f"{name} is an aligner experiment (it binds AlignRun): run it with "
                              f"`flowkit align train {name} --data STORE --out ALIGN_RUN`")


def train(
    config: _Configs,
    binding: _Bindings = None,
    data: _Data = None,
    out: _Out = None,
    steps: _Steps = None,
    device: _Device = "auto",
    nproc: _Nproc = None,
    init_from: Annotated[
        Path | None,
        typer.Option("--init-from", help="Start from this run's (or checkpoint's) weights, EMA and latent stats: "
                     "a fine-tune."),
    ] = None,
) -> None:
    """Start a training run from a gin experiment.

    Re-running the same command continues the run (a requeued cluster job): a run
    directory holding a run of the same config goes on from its newest valid checkpoint,
    or from step 0 when it has none; one of another config is refused, naming the first
    differing binding. Ctrl-C or SIGTERM finish the current step, write a checkpoint and
    exit 130. `--nproc N` trains with N processes under torchrun (docs/distributed.md).
    """
    _under_torchrun(nproc)
    import shutil

    from flowkit.errors import WriteError
    from flowkit.io import check_out_path, check_writable, refused_writes
    from flowkit.train.run import default_run_dir
    from flowkit.train.run import train as run_train

    _refuse_aligner_config(config)
    out = out or default_run_dir(config[0])
    check_out_path(out, label=f"--out {out}", folder=True)
    check_writable(out, label=f"--out {out}")  # a read-only, full or locked disk: refused before the data load
    began = not out.exists()
    try:
        with refused_writes(f"--out {out}", out):
            outcome = run_train(
                config, binding or (), data=data or (), out=out, steps=steps, device=device, init_from=init_from,
            )
    except WriteError:
        # a run directory this command began and that holds no checkpoint is not left half-made
        if began and not any((out / "checkpoints").glob("step-*")):
            shutil.rmtree(out, ignore_errors=True)
        raise
    _finish(outcome)


def resume(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by flowkit train.")],
    steps: _Steps = None,
    binding: _Bindings = None,
    device: _Device = "auto",
    nproc: _Nproc = None,
    restore_config: Annotated[
        bool,
        typer.Option("--restore-config", help="When RUN_DIR/config.gin is missing, write it back from the config "
                     "its newest valid checkpoint holds, then continue."),
    ] = False,
) -> None:
    """Continue a run from its newest valid checkpoint, bit-identically.

    The run's config.gin is re-read; only logging, evaluation, saving and a higher
    --steps may differ from the checkpoint's config. Changed data are refused. A run
    with no valid checkpoint yet starts again from step 0. A run trained by N processes
    resumes with N (`--nproc N`, or the same torchrun world size). A deleted config.gin
    is written back from the newest checkpoint with --restore-config.
    """
    _under_torchrun(nproc)
    from flowkit.io import check_writable
    from flowkit.train.run import resume as run_resume

    check_writable(run_dir, label=f"RUN_DIR {run_dir}")

    _finish(run_resume(run_dir, steps=steps, bindings=binding or (), device=device, restore_config=restore_config))


def init_from(
    parent_checkpoint: Annotated[Path, typer.Argument(
        help="A checkpoint directory (RUN/checkpoints/step-N or RUN/best/step-N) or a run directory.")],
    config: _Configs,
    binding: _Bindings = None,
    data: _Data = None,
    out: _Out = None,
    steps: _Steps = None,
    device: _Device = "auto",
) -> None:
    """Start a new run from another run's weights, EMA and latent stats (a fine-tune):
    `flowkit train CONFIG --init-from PARENT`.

    The optimizer, learning-rate schedule, sampler and random streams start fresh. The
    network (preset, sizes, arch) is the parent's, with one line naming each config value
    it replaced; text_path, dur_cond and conditions must match the parent's, except
    dur_cond 'none' -> 'emotion' and conditions False -> True. Data of another encoder
    than the parent's are refused.
    """
    train(config, binding, data, out, steps, device, None, parent_checkpoint)
