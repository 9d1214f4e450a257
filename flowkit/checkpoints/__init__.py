"""Checkpoints as files: the format that training writes and synthesis, reports and interop read.

`files`: save, list, verify, find and load checkpoints (atomic directories with a
``COMPLETE`` marker and checksums) and load a state dict strictly; `synthesis_meta`: the
record of what synthesis needs (schedule, solver) that every checkpoint's meta carries.
It sits below `flowkit.train` and `flowkit.synth`, so synthesis never imports training.
"""
