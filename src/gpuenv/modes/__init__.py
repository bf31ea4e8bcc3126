"""Measurement modes: one package each (gpuenv.modes.throughput, gpuenv.modes.ttr), the contract they
implement in gpuenv.modes.base, the table that names them in gpuenv.mode_table (re-exported here:
readers write `from gpuenv.modes import of`)."""

from gpuenv.mode_table import MODE_PACKAGES, all_modes, by_mode, get_mode, known_modes, mode_for_kind, of, record_model, record_module

__all__ = ["MODE_PACKAGES", "all_modes", "by_mode", "get_mode", "known_modes", "mode_for_kind", "of", "record_model", "record_module"]
