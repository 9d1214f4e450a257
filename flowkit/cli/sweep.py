"""``flowkit sweep``: a thin wrapper over `flowkit.sweep.run.run_sweep`.

Only typer, pathlib and typing are imported here; gin, torch, submitit and optuna load
inside the command body so ``--help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

EXIT_CODES = (
    "Exit codes: 0 every point done (or submitted); 2 a bad --grid, binding or option (before any run starts), "
    "or another spec in --out; 3 another sweep process is running in --out (its pid named); 5 some points "
    "failed (see SWEEP_DIR/logs; the same command retries them); 6 --out on a read-only or full disk; "
    "130 stopped by Ctrl-C/SIGTERM with the running points' checkpoints saved (the same command continues)."
)


def sweep(
    config: Annotated[list[Path], typer.Argument(help="The experiment's gin file(s), as for flowkit train.")],
    out: Annotated[Path, typer.Option("--out", help="Sweep directory: sweep.json and one run directory per point.")],
    grid: Annotated[
        list[str] | None,
        typer.Option("--grid", help="A swept binding and its gin values: \"Trainer.lr=[1e-3, 2e-3]\", "
                     "\"Trainer.schedule=[@schedule.flow_matching(), @schedule.cosine_vpred()]\"; "
                     "repeatable (product)."),
    ] = None,
    random: Annotated[
        int | None,
        typer.Option("--random", min=1, help="Run N distinct points drawn from the grid instead of all of it."),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the --random draw and of the Optuna sampler.")] = 0,
    seeds: Annotated[int, typer.Option("--seeds", min=1, help="Repeat every point with Trainer.seed = 0 .. K-1.")] = 1,
    binding: Annotated[
        list[str] | None,
        typer.Option("-b", "--binding", help="A gin binding every point shares, before the point's own; repeatable."),
    ] = None,
    data: Annotated[
        list[Path] | None, typer.Option("--data", help="A latent store every point trains on; repeatable.")
    ] = None,
    steps: Annotated[
        int | None, typer.Option("--steps", min=1, help="Train every point for N steps (Trainer.steps = N, after "
                                 "the -b bindings), as train's --steps.")
    ] = None,
    launcher: Annotated[
        str, typer.Option("--launcher", help="local (this machine), slurm (a job array through submitit), or "
                          "submitit-local (submitit's LocalExecutor: the slurm path on this machine).")
    ] = "local",
    parallel: Annotated[
        int, typer.Option("--parallel", min=1, help="Points at once (local: each gets cores // J threads; slurm: "
                          "the array's parallelism).")
    ] = 1,
    device: Annotated[
        str, typer.Option("--device", help="--device of every point's flowkit train (cpu, cuda, auto).")
    ] = "auto",
    optuna: Annotated[
        int | None, typer.Option("--optuna", min=1, help="Search the grid's values with an Optuna study of TRIALS "
                                 "trials (SWEEP_DIR/optuna.db).")
    ] = None,
    objective: Annotated[
        str, typer.Option("--objective", help="What the best point minimises: val_loss_ema (best EMA validation "
                          "loss) or probe_wer.")
    ] = "val_loss_ema",
    wait: Annotated[
        bool, typer.Option("--wait", help="slurm: wait for the jobs instead of returning once they are submitted.")
    ] = False,
    timeout_min: Annotated[
        int | None, typer.Option("--timeout-min", min=1, help="slurm: each job's time limit in minutes (default 1440).")
    ] = None,
    partition: Annotated[str | None, typer.Option("--partition", help="slurm: the partition.")] = None,
    gpus_per_node: Annotated[int | None, typer.Option("--gpus-per-node", min=0, help="slurm: GPUs per job.")] = None,
    cpus_per_task: Annotated[int | None, typer.Option("--cpus-per-task", min=1, help="slurm: CPUs per job.")] = None,
    mem_gb: Annotated[int | None, typer.Option("--mem-gb", min=1, help="slurm: memory per job in GB.")] = None,
    slurm_arg: Annotated[
        list[str] | None, typer.Option("--slurm-arg", help="slurm: another sbatch option as KEY=VALUE "
                                       "(e.g. account=myteam); repeatable.")
    ] = None,
) -> None:
    """Run one experiment over a grid of gin bindings: one ordinary run directory per point.

    Every point's config is checked before any run starts. Re-running the same command
    skips finished points and continues interrupted ones (each point is the fixed
    `flowkit train ... --out SWEEP_DIR/POINT` command); another grid into the same
    --out is refused. Compare the points with `flowkit report SWEEP_DIR`.
    """
    from flowkit import config as gin_config
    from flowkit.console import console
    from flowkit.errors import ConfigError
    from flowkit.sweep.grid import parse_axis
    from flowkit.sweep.run import EXIT_INTERRUPTED, run_sweep
    from flowkit.sweep.state import SweepSpec

    slurm: dict[str, object] = {}
    for key, value in (("timeout_min", timeout_min), ("slurm_partition", partition), ("gpus_per_node", gpus_per_node),
                       ("cpus_per_task", cpus_per_task), ("mem_gb", mem_gb)):
        if value is not None:
            slurm[key] = value
    extra = {}
    for item in slurm_arg or ():
        k, sep, v = item.partition("=")
        if not sep or not k.strip():
            raise ConfigError(f"--slurm-arg {item!r}: give KEY=VALUE, e.g. --slurm-arg account=myteam")
        extra[k.strip()] = v.strip()
    if extra:
        slurm["slurm_additional_parameters"] = extra
    if slurm and launcher == "local":
        raise ConfigError("--timeout-min/--partition/--gpus-per-node/--cpus-per-task/--mem-gb/--slurm-arg are for "
                          "--launcher slurm; drop them or add --launcher slurm")
    spec = SweepSpec(
        configs=tuple(str(gin_config.resolve_config_file(c)) for c in config),
        bindings=(*(binding or ()), *([f"Trainer.steps = {steps}"] if steps is not None else [])),
        data=tuple(str(Path(d).resolve()) for d in data or ()),
        grid=tuple(parse_axis(g) for g in grid or ()),
        random=random, seed=seed, seeds=seeds, optuna=optuna, objective=objective,
    )

    def say(line: str) -> None:
        console.print(line, highlight=False, markup=False, soft_wrap=True)

    outcome = run_sweep(spec, out, launcher=launcher, parallel=parallel, device=device, slurm=slurm, wait=wait, say=say)
    if outcome.interrupted:
        raise typer.Exit(EXIT_INTERRUPTED)
