"""gpuenv: one harness for RL simulator benchmarks."""

__version__ = "0.1.0"
