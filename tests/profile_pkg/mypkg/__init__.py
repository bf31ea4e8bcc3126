"""Test-only: a user's own package of envs, as `gpuenv profile` meets one (tests/test_profile.py)."""
