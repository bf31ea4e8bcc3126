from __future__ import annotations

import numpy as np
import pytest

from gpuenv.measure import stats


def test_median_and_interval_contain_truth():
    rng = np.random.default_rng(1)
    groups = [list(1000 + rng.normal(0, 10, 5)) for _ in range(4)]
    s = stats.summarize(groups)
    assert s.ci_low <= s.median <= s.ci_high
    assert 980 < s.ci_low < 1000 < s.ci_high < 1020
    assert s.n_values == 20 and s.n_processes == 4
    assert not s.wide


def test_process_to_process_spread_widens_the_interval():
    tight = [[100.0, 100.1, 99.9]] * 3
    spread = [[80.0, 80.1, 79.9], [100.0, 100.1, 99.9], [120.0, 120.1, 119.9]]
    assert stats.summarize(spread).rel_half_width > 5 * stats.summarize(tight).rel_half_width
    assert stats.summarize(spread).wide


def test_ratio_of_medians():
    a = [[200.0, 201.0, 199.0]] * 3
    b = [[100.0, 100.5, 99.5]] * 3
    r = stats.ratio(a, b)
    assert r.median == pytest.approx(2.0)
    assert r.ci_low <= 2.0 <= r.ci_high


def test_empty_input_is_an_error():
    with pytest.raises(ValueError):
        stats.summarize([[]])
