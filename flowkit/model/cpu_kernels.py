"""`flowkit.converters.cpu.sampling_kernels` under the name `flowkit.evaluation.run` imports;
the CPU layers themselves are `flowkit.converters`."""

from flowkit.converters.cpu import sampling_kernels

__all__ = ["sampling_kernels"]
