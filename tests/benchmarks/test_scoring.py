"""The corpus benchmark's judging and fitting (benchmarks/corpus/scoring.py) on small synthetic cause lists."""
import math

import pytest
from corpus import scoring


def cause(key, rank, score, factors, tier=None):
    out = {"key": key, "rank": rank, "tied": 0, "score": score,
           "factors": [{"factor": name, "value": value, "why": ""} for name, value in factors]}
    if tier:
        out["reach"] = {"tier": tier}
    return out


def scene(family, variant, causes, truth):
    return {"family": family, "variant": variant, "causes": scoring.reduce_causes(causes, truth)}


def test_truth_keys_match_exactly_or_by_glob():
    assert scoring.is_truth("env.OMP_NUM_THREADS", ["env.OMP_NUM_THREADS"])
    assert scoring.is_truth("workers.python.env.FOO", ["workers.*.env.FOO"])
    assert not scoring.is_truth("env.FOO_BAR", ["env.FOO"])


def test_features_are_logs_summed_per_name():
    f = scoring.features(cause("a", 1, 0.5, [("prior", 0.5), ("read_by_process", 2.0), ("read_by_process", 2.0)]))
    assert f["prior"] == pytest.approx(math.log(0.5))
    assert f["read_by_process"] == pytest.approx(2 * math.log(2.0))


def test_all_ones_reproduces_todays_score():
    c = scoring.reduce_causes([cause("a", 1, 0.0, [("prior", 0.3), ("x", 2.0)])], [])[0]
    assert scoring.to_score(scoring.log_score(c, {})) == pytest.approx(1 - math.exp(-2.3 * 0.6))


def test_shipped_judging_uses_the_rankings_own_ranks_and_ties():
    alone = [cause("t", 1, 0.9, [("prior", 0.9)]), cause("i", 2, 0.4, [("prior", 0.2)])]
    tied = [cause("t", 1, 0.9, [("prior", 0.9)]), cause("i", 1, 0.9, [("prior", 0.9)])]
    j = scoring.judge(scoring.reduce_causes(alone, ["t"]))
    assert j["top1_alone"] and j["truth_rank"] == 1 and j["margin"] == pytest.approx(0.5)
    j = scoring.judge(scoring.reduce_causes(tied, ["t"]))
    assert not j["top1_alone"] and j["truth_rank"] == 1 and j["margin"] == pytest.approx(0.0)


def test_a_missed_truth_names_what_ranked_first_and_its_factors():
    causes = [cause("i", 1, 0.8, [("prior", 0.5), ("famous", 3.0)]), cause("t", 2, 0.3, [("prior", 0.3)])]
    j = scoring.judge(scoring.reduce_causes(causes, ["t"]))
    assert not j["top1_alone"] and j["truth_rank"] == 2
    assert j["first_innocent"]["key"] == "i" and j["first_innocent"]["top_factors"][0] == "famous=3"
    assert j["margin"] == pytest.approx(-0.5)


def test_an_absent_truth_is_a_miss_with_margin_below_zero():
    j = scoring.judge(scoring.reduce_causes([cause("i", 1, 0.2, [("prior", 0.2)])], ["t"]))
    assert j["truth_rank"] is None and not j["top1_alone"] and j["margin"] == pytest.approx(-0.2)


def test_reach_tier_orders_before_the_score_when_weights_rescore():
    causes = scoring.reduce_causes([cause("t", 2, 0.3, [("prior", 0.1)], tier="acted"),
                                    cause("i", 1, 0.9, [("prior", 0.9)], tier="cannot")], ["t"])
    assert scoring.judge(causes, {})["top1_alone"]
    # without tiers the same scores put the innocent first
    plain = scoring.reduce_causes([cause("t", 2, 0.3, [("prior", 0.1)]), cause("i", 1, 0.9, [("prior", 0.9)])], ["t"])
    assert not scoring.judge(plain, {})["top1_alone"]


def test_rescored_ties_share_rank_one():
    causes = scoring.reduce_causes([cause("t", 1, 0.5, [("prior", 0.3)]), cause("i", 1, 0.5, [("prior", 0.3)])], ["t"])
    j = scoring.judge(causes, {})
    assert not j["top1_alone"] and j["truth_rank"] == 1


def _families(n_families=4, variants=3):
    """Each family: the truth has factor 'good'=2 and a low prior; an innocent has a high prior and 'bad'=3
    (a factor that wrongly pushes innocents up); another innocent is plain. With all weights 1 the innocent wins
    (0.1*2 < 0.3*3); a fit that raises 'good' or lowers 'bad' puts the truth first."""
    out = []
    for f in range(n_families):
        for v in range(variants):
            out.append(scene(f"fam{f}", f"v{v}", [
                cause("truth", 2, 0.0, [("prior", 0.1), ("good", 2.0)]),
                cause("loud", 1, 0.0, [("prior", 0.3), ("bad", 3.0)]),
                cause("quiet", 3, 0.0, [("prior", 0.05)]),
            ], ["truth"]))
    return out


def test_fit_learns_weights_that_put_the_truth_first():
    data = _families()
    assert scoring.summarize([scoring.judge(s["causes"], {}) for s in data])["top1_alone"] == 0.0
    result = scoring.fit(data, l2=0.01)
    assert result["weights"]["good"] > 1.0 and result["weights"]["bad"] < 1.0
    assert scoring.summarize([scoring.judge(s["causes"], result["weights"]) for s in data])["top1_alone"] == 1.0


def test_fit_is_deterministic_and_l2_pulls_toward_one():
    data = _families()
    assert scoring.fit(data, l2=0.01)["weights"] == scoring.fit(data, l2=0.01)["weights"]
    strong = scoring.fit(data, l2=100.0)["weights"]
    assert all(abs(w - 1.0) < 0.05 for w in strong.values())


def test_a_factor_seen_in_too_few_families_stays_at_one_and_is_reported():
    data = _families(n_families=3)
    data.append(scene("rare", "v0", [cause("truth", 1, 0.0, [("prior", 0.2), ("rare", 5.0)]),
                                     cause("other", 2, 0.0, [("prior", 0.2)])], ["truth"]))
    result = scoring.fit(data, l2=0.01, min_families=3)
    assert result["weights"]["rare"] == 1.0 and "rare" in result["unsupported"]
    assert result["support"]["rare"] == ["rare"] and "good" in result["fitted"]


def test_pairs_only_within_a_tier():
    causes = scoring.reduce_causes([cause("t", 1, 0.0, [("prior", 0.1)], tier="acted"),
                                    cause("a", 2, 0.0, [("prior", 0.5)], tier="cannot"),
                                    cause("b", 2, 0.0, [("prior", 0.5)], tier="acted")], ["t"])
    assert len(scoring.pairs(causes)) == 1


def test_leave_one_family_out_never_sees_the_judged_family():
    data = _families(n_families=3)
    # family 'odd' is the only one where 'good' marks an innocent: fitted on the others, it is judged wrong
    data += [scene("odd", "v0", [cause("truth", 1, 0.0, [("prior", 0.2)]),
                                 cause("decoy", 2, 0.0, [("prior", 0.1), ("good", 2.0)])], ["truth"])]
    held = scoring.leave_one_family_out(data, l2=0.01, min_families=2)
    assert held["odd"]["weights"]["good"] > 1.0
    assert not held["odd"]["judged"][0]["top1_alone"]
    assert all(j["top1_alone"] for j in held["fam0"]["judged"])


def test_the_bands_match_envsnaps_and_a_folded_truth_counts():
    from corpus import scoring

    from envsnap.analysis.rank.reach_model import ORDER_BANDS, Reach

    assert scoring.TIER_BANDS == ORDER_BANDS
    # a reach's order is what the corpus judge sorts by: observed could-act over could-act by name
    observed = Reach("could_act", "readable_by_loaded_code", "readable by libx.so").to_json()
    named = Reach("could_act", "name", "").to_json()
    assert scoring.tier_of({"reach": observed}) > scoring.tier_of({"reach": named}) == scoring.DEFAULT_TIER
    cause = {"key": "startup./site/hook.py", "folded": [{"key": "env.X"}], "factors": [], "rank": 1, "score": 0.6}
    [reduced] = scoring.reduce_causes([cause], ["env.X"])
    assert reduced["truth"] is True
    assert scoring.to_score(0.0, 3) >= 0.5 >= scoring.to_score(50.0, 2) >= 0.3 >= scoring.to_score(50.0, 1) >= 0.1 \
        >= scoring.to_score(50.0, 0)
    assert scoring.to_score(-50.0, 1) >= 0.1 and scoring.to_score(0.0) == scoring.to_score(0.0, None)
