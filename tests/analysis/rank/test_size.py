"""A cause's measured share of the loss (analysis/rank/size.py): a traced component against the step's growth,
a neighbour's share of the machine against the share of time the runs lost."""
from __future__ import annotations

from envsnap.analysis.compare.diff import Difference
from envsnap.analysis.rank import size
from envsnap.analysis.rank.kinds import neighbour
from envsnap.analysis.rank.reach_model import loss_share
from envsnap.model.keys import Subject


def _trace(good_step, bad_step, rows):
    return {"step_ms": {"good": good_step, "bad": bad_step},
            "components": [{"component": c, "change_ms": ms, "moved": True} for c, ms in rows]}


def test_a_component_that_grew_by_the_whole_loss_accounts_for_it():
    found = size.of_component("kernels", _trace(10.0, 16.0, [("kernels", 5.9), ("communication", 0.1)]))
    assert found is not None and 0.97 < found.share < 0.99 and "unexplained" not in found.line()


def test_a_component_that_grew_by_part_of_the_loss_leaves_the_rest_unexplained():
    found = size.of_component("kernels", _trace(10.0, 20.0, [("kernels", 4.0)]))
    assert found is not None and abs(found.share - 0.4) < 1e-9
    assert found.line().endswith("unexplained: 60% of the loss")
    assert size.of_component("communication", _trace(10.0, 20.0, [("kernels", 4.0)])) is None
    assert size.of_component("kernels", _trace(10.0, 9.0, [("kernels", 4.0)])) is None  # the step did not grow


def test_loss_share_by_the_metric_direction():
    assert abs(loss_share({"change_pct": -56.0, "direction": "higher"}) - 0.56) < 1e-9
    assert abs(loss_share({"change_pct": 50.0, "direction": "lower"}) - 1 / 3) < 1e-9
    assert loss_share({"change_pct": 10.0, "direction": "higher"}) is None  # better, not a loss
    assert loss_share({"change_pct": None, "direction": "higher"}) is None


def test_a_neighbour_sized_against_the_loss():
    d = Difference(key="neighbour.cpu.hog", category="neighbours", change="added", good=None,
                   bad={"cpus": 1.0, "cpus_online": 4}, volatile=False, flat_keys=[],
                   subject=Subject("neighbour", "hog", "cpu"))
    found = neighbour.size(d, 0.5)
    assert found is not None and abs(found.share - 0.5) < 1e-9  # 25% of the machine, half of a 50% loss
    assert neighbour.size(d, None) is None


def test_an_acted_cause_whose_component_the_traces_found_unchanged_could_act_by_its_size():
    """A thread setting the runs' peak threads moved with (acted) acts on the host; the profiler traces measured
    the host's time per step and it held while GEMM grew: it met the process but cannot account for the loss, so
    it could act, by its size, and cannot lead. Without the traces' factor it acted."""
    from helpers.diff import snap

    from envsnap.analysis.compare import diff as diff_mod
    from envsnap.analysis.rank import reach

    comp = diff_mod.compare(snap("g", env={"OMP_NUM_THREADS": "4"}), snap("b", env={"OMP_NUM_THREADS": "8"}))
    d = next(x for x in comp.differences if x.key == "env.OMP_NUM_THREADS")
    moved = ("series_moved", "the runs' peak threads moved with it (9 \u2192 13): it sizes OpenMP's thread pool")
    held = ("trace_held", "the profiler traces measured its component (cpu/host) and it held: per step: GEMM +5.8 ms")
    assert reach.reach_of(d, [moved], comp).tier == reach.ACTED
    sized = reach.reach_of(d, [moved, held], comp)
    assert sized.tier == reach.COULD_ACT and sized.basis == "size"
    assert sized.observation.startswith("the runs' peak threads moved with it")
    assert "its component (cpu/host) and it held while the step grew: it cannot account" in sized.observation
    assert reach.order_of(sized.tier, sized.basis) < reach.order_of(reach.COULD_ACT, "readable_by_loaded_code")
