from skillopt_sleep.night.gate import gate
from skillopt_sleep.night.replay import Scored


def sc(**scores):
    return {
        k: Scored(task_id=k, answer="", tool_calls=[], hard=v, soft=None, score=v)
        for k, v in scores.items()
    }


def test_strict_improvement_required():
    assert gate(sc(a=0.0, b=1.0), sc(a=1.0, b=1.0)).accepted
    v = gate(sc(a=0.5, b=0.5), sc(a=0.5, b=0.5))
    assert not v.accepted and "no strict improvement" in v.reason


def test_no_regression_blocks_a_better_mean():
    v = gate(sc(a=0.0, b=1.0, c=0.0), sc(a=1.0, b=0.5, c=1.0))
    assert not v.accepted and v.regressions == ["b"]
    assert gate(sc(a=0.0, b=1.0, c=0.0), sc(a=1.0, b=0.5, c=1.0), no_regression=False).accepted


def test_non_strict_gate_for_consolidation():
    assert gate(sc(a=1.0), sc(a=1.0), strict=False).accepted
    assert not gate(sc(a=1.0), sc(a=0.5), strict=False).accepted


def test_on_a_tie_the_shorter_document_wins():
    same = sc(a=0.5, b=1.0)
    v = gate(same, sc(a=0.5, b=1.0), shorter=True)
    assert v.accepted and "same score, shorter document" in v.reason
    v = gate(same, sc(a=0.5, b=1.0), shorter=False)
    assert not v.accepted and "not shorter" in v.reason
    # a merge that keeps the score but grows the document is refused too
    assert not gate(sc(a=1.0), sc(a=1.0), strict=False, shorter=False).accepted
    assert gate(sc(a=1.0), sc(a=1.0), strict=False, shorter=True).accepted


def test_a_shorter_document_is_no_excuse_for_a_regression():
    v = gate(sc(a=0.0, b=1.0), sc(a=1.0, b=0.0), shorter=True)
    assert not v.accepted and v.regressions == ["b"]
    # and size only breaks ties: a better score still needs no size argument
    assert gate(sc(a=0.0), sc(a=1.0), shorter=False).accepted
