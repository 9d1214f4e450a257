"""Converters: changes applied to a built model, in place, by a run's settings.

The model (`flowkit.model`) is built from standard ``torch.nn`` layers and never knows about
these; a run applies them after building it, as torchtitan applies its model converters:

- `flowkit.converters.cpu`: CPU layers with kernels chosen for this machine
  (``Trainer.cpu_kernels``; sampling's `flowkit.converters.cpu.sampling_kernels`);
- `flowkit.converters.checkpointing`: activation checkpointing per DiT block
  (``Trainer.activation_checkpointing``).
"""
