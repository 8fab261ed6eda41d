"""ranking_accuracy's figures and table from analysed scenarios (synthetic cause lists: no snapshots)."""
import json

import ranking_accuracy
from test_scoring import _families, cause, scene


def test_evaluate_reports_shipped_and_lofo_per_family_with_misses():
    data = _families(n_families=3, variants=2)
    report = ranking_accuracy.evaluate(data, l2=0.01, min_families=2)
    assert report["families"] == 3 and report["scenarios"] == 6
    assert report["shipped"]["overall"]["top1_alone"] == 0.0  # the shipped ranks put "loud" first
    miss = report["shipped"]["families"][0]["misses"][0]
    assert miss["truth_rank"] == 2 and miss["first"]["key"] == "loud"
    assert report["lofo"]["overall"]["top1_alone"] == 1.0  # fitted on the two other families
    report["analysis_s"] = 0.0
    table = ranking_accuracy.markdown(report)
    assert "| fam0 | 2 | 2 | 0 % |" in table and "`loud` (prior=0.3, bad=3)" in table
    json.dumps(report)  # --json prints it


def test_truth_absent_from_the_causes_is_named_absent():
    data = [scene("f", "v0", [cause("other", 1, 0.3, [("prior", 0.3)])], ["missing"])]
    report = ranking_accuracy.evaluate(data, lofo=False)
    assert "truth rank absent" in ranking_accuracy.markdown(dict(report, analysis_s=0.0))
