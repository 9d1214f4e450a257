"""Sweeps: many runs of one experiment over a grid of gin bindings (``flowkit sweep``).

- `flowkit.sweep.grid`: ``--grid KEY=[VALUES]`` axes and the points (product, random
  draws, seeds);
- `flowkit.sweep.naming`: each point's run directory name;
- `flowkit.sweep.check`: every point's config parsed and built before any run starts;
- `flowkit.sweep.state`: ``sweep.json`` (the spec, the points, their state);
- `flowkit.sweep.launchers`: the local launcher and submitit's job arrays;
- `flowkit.sweep.run`: `run_sweep`, the story of a sweep (and the Optuna loop).

This package sits just below the CLI: it launches training as ``flowkit train``
subprocesses and reads run directories through `flowkit.report.rundir`; of the trainer it
imports only the `Trainer` entry point, to build each point's config as ``flowkit
config`` does.
"""
