"""`backend.options = {...}` is all or nothing (issue 24, questionable item): the entries were
applied one by one, so a bad one raised after those before it had taken effect. The class: a bad
key, a value out of range and a value of the wrong type, at every position of the dict, on every
device, leave every option as it was."""
from __future__ import annotations

import pytest

import metal_backend as mb


def _settable(options):
    key = next(k for k in ("debug", "spin_us", "n_cb") if k in options)
    return key


@pytest.mark.parametrize("bad", [("no_such_option", 1), ("n_threads_or_cb", 10 ** 9), ("n_threads_or_cb", "x")])
@pytest.mark.parametrize("position", [0, 1, 2])
def test_a_bad_entry_leaves_every_option_unchanged(device, bad, position):
    be = device.init_backend()
    before = be.options.to_dict()
    good = _settable(before)
    new_value = 1 if before[good] != 1 else 0
    count_key = "n_threads" if "n_threads" in before else "n_cb"
    key, value = bad
    key = count_key if key == "n_threads_or_cb" else key
    entries = [(good, new_value), ("fusion" if "fusion" in before else good, before.get("fusion", new_value))]
    entries.insert(position, (key, value))
    with pytest.raises((mb.InvalidArgumentError, TypeError)):
        be.options = dict(entries)
    assert be.options.to_dict() == before
    be.options = {good: new_value}
    assert be.options[good] == new_value
