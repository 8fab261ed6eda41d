"""Bisect starts from the evidence (bisect/search.guided_search, guess.py): the search's paths with an
exact oracle, and the real CLI on real captures with the culprit ranked first or not, with and without the
guess."""
from __future__ import annotations

import json

import pytest
from helpers.bench import base_env, bench_cmd, capture_pair, run_cli

from envsnap.bisect import ddmin as ddmin_mod, search as search_mod

NAMES = [f"V{i:02d}" for i in range(20)]


class OracleBisector(search_mod.Bisector):
    """The search alone: test() answers from a rule instead of running a benchmark, and counts configurations
    (+2 for the GOOD and BAD baselines, as `configurations_run` counts them)."""

    def __init__(self, names, bad_when):  # noqa: D107 - no journal, no command
        self.names = list(names)
        self.current = list(names)
        self.bad_when = bad_when
        self.seen = {}
        self.path = {"guided": False, "steps": []}
        self.since_check = []  # never filled: test() below measures nothing, so no drift check

    def test(self, key):
        if key not in self.seen:
            self.seen[key] = ddmin_mod.BAD if self.bad_when(set(key)) else ddmin_mod.GOOD
        return self.seen[key]


def _configs(names, bad_when, first=()):
    bisector = OracleBisector(names, bad_when)
    found = bisector.search(first)
    return found, len(bisector.seen) + 2, bisector.path


def test_a_right_guess_takes_three_configurations_and_plain_ddmin_up_to_twelve():
    plain = []
    for cause in NAMES:
        found, guided, path = _configs(NAMES, lambda s, c=cause: c in s, first=[cause])
        assert found == [cause] and guided == 3 and path["result"] == "the guess reproduces BAD alone"
        plain.append(_configs(NAMES, lambda s, c=cause: c in s)[1])
    assert max(plain) == 12 and min(plain) > 3


def test_a_wrong_guess_costs_at_most_two_more_than_ddmin():
    worst_extra = 0
    for cause in NAMES:
        for wrong in (n for n in NAMES if n != cause):
            found, guided, path = _configs(NAMES, lambda s, c=cause: c in s, first=[wrong])
            plain = _configs(NAMES, lambda s, c=cause: c in s)[1]
            assert found == [cause]
            assert [s["outcome"] for s in path["steps"]] == ["good", "bad"]
            worst_extra = max(worst_extra, guided - plain)
    assert worst_extra <= 2


def test_a_guessed_group_is_searched_within_and_an_interaction_keeps_the_guess_in():
    # The first rank a group of 4 tied causes, the culprit among them: ddmin within the group.
    group = ["V03", "V07", "V11", "V15"]
    found, guided, path = _configs(NAMES, lambda s: "V11" in s, first=group)
    assert found == ["V11"] and guided <= 2 + 1 + 4
    # The guess is needed but not enough (slow only together with V17): BAD minus it is GOOD, and the rest is
    # searched with the guess kept in.
    found, guided, path = _configs(NAMES, lambda s: {"V05", "V17"} <= s, first=["V05"])
    assert found == ["V05", "V17"]
    assert [s["outcome"] for s in path["steps"]] == ["good", "good"] and "needed but not enough" in path["result"]
    plain_found, plain, _ = _configs(NAMES, lambda s: {"V05", "V17"} <= s)
    assert plain_found == found and guided <= plain + 2


@pytest.mark.slow
def test_real_bisect_starts_from_the_ranked_cause(tmp_path):
    # Real captures differing in 20 variables: OPENBLAS_CORETYPE (a known setting: ranked first) and 19
    # unknown ones. The benchmark is slow when OPENBLAS_CORETYPE has BAD's value, then when one of the unknown
    # ones does (the guess is wrong there).
    names = [f"GUESS_T_V{i:02d}" for i in range(19)]
    good_env = {**{n: "g" for n in names}, "OPENBLAS_CORETYPE": "Haswell"}
    bad_env = {**{n: "b" for n in names}, "OPENBLAS_CORETYPE": "Prescott"}
    good, bad = capture_pair(tmp_path, {}, good_env, bad_env)
    env = base_env(**{n: None for n in names}, OPENBLAS_CORETYPE=None)
    out = {}
    for culprit, slow in (("OPENBLAS_CORETYPE", "OPENBLAS_CORETYPE=Prescott:0.5"), (names[13], f"{names[13]}=b:0.5")):
        for flag in ([], ["--no-guess"]):
            journal = tmp_path / f"j-{culprit}-{len(flag)}.jsonl"
            result = run_cli("bisect", good, bad, "--repeat", "1", "--format", "json", "--journal", journal, *flag,
                             "--", *bench_cmd("env", "--slow", slow), env=env)
            assert result.returncode == 0, result.stderr[-800:]
            answer = json.loads(result.stdout)
            assert [d["name"] for d in answer["minimal"]] == [culprit]
            out[(culprit, bool(flag))] = answer
    right = out[("OPENBLAS_CORETYPE", False)]
    assert right["guess"]["keys"] == ["env.OPENBLAS_CORETYPE"] and right["configurations_run"] == 3
    assert right["path"]["line"].startswith("started from the ranking's first candidate (env.OPENBLAS_CORETYPE)")
    assert out[("OPENBLAS_CORETYPE", True)]["path"]["guided"] is False
    assert out[("OPENBLAS_CORETYPE", True)]["configurations_run"] > 3
    wrong = out[(names[13], False)]
    assert wrong["configurations_run"] <= out[(names[13], True)]["configurations_run"] + 2
    assert [s["outcome"] for s in wrong["path"]["steps"]] == ["good", "bad"]
    # Run again on the wrong guess's journal: every configuration, the guess's two included, comes from it.
    again = run_cli("bisect", good, bad, "--repeat", "1", "--format", "json", "--journal",
                    tmp_path / f"j-{names[13]}-0.jsonl", "--", *bench_cmd("env", "--slow", f"{names[13]}=b:0.5"), env=env)
    replayed = json.loads(again.stdout)
    assert replayed["runs"]["new"] == 0 and replayed["runs"]["from_journal"] == wrong["runs"]["total"]
    assert replayed["path"] == wrong["path"] and replayed["minimal"] == wrong["minimal"]
    text = run_cli("bisect", good, bad, "--repeat", "1", "--journal", tmp_path / "j-OPENBLAS_CORETYPE-0.jsonl", "--",
                   *bench_cmd("env", "--slow", "OPENBLAS_CORETYPE=Prescott:0.5"), env=env).stdout
    assert "path: started from the ranking's first candidate (env.OPENBLAS_CORETYPE): GOOD + guess: bad" in text
