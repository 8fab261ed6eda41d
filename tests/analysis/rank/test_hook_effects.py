"""What a start-up hook's code does to the environment (analysis/rank/hook_effects.py), read by Python's parser."""
from __future__ import annotations

import pytest

from envsnap.analysis.rank.hook_effects import effects


@pytest.mark.parametrize("text, sets, only", [
    ("import os\nos.environ['A'] = '1'\n", {"A"}, True),
    ("import os\n# mentions NCCL_IB_DISABLE only\nos.environ.setdefault('B', 'x')\n", {"B"}, True),
    ("import os\nos.environ.update({'C': '1', 'D': '2'})\n", {"C", "D"}, True),
    ("import os\nos.putenv('E', '1')\nos.unsetenv('F')\n", {"E", "F"}, True),
    ("import os\ndel os.environ['G']\nos.environ.pop('H', None)\n", {"G", "H"}, True),
    ('"""docstring"""\nfrom os import environ\nenviron["I"] = "1"\n', {"I"}, True),
    ("import os\nprint(os.environ.get('NCCL_PROTO'))\n", set(), False),  # a read is not a setting
    ("import os, time\ntime.sleep(0)\nos.environ['J'] = '1'\n", {"J"}, False),  # imports and runs more
    ("import os\nif True:\n    os.environ['K'] = '1'\n", {"K"}, False),  # conditional: does more than set
    ("import os\n", set(), True),
])
def test_the_variables_a_hook_sets_and_whether_it_does_anything_else(text, sets, only):
    found = effects(text)
    assert found is not None and found.sets == sets and found.only_settings is only


def test_text_that_is_not_python_is_not_judged():
    assert effects("/opt/some/path\n/opt/other\n") is None
    assert effects("def (:\n") is None


def test_a_read_whose_value_is_dropped_does_nothing():
    found = effects("import os; os.environ.get('TORCH_NCCL_BLOCKING_WAIT')  # reads, changes nothing\n")
    assert found is not None and found.sets == set() and found.only_settings is True
