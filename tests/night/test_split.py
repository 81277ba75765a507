"""Deterministic, stable train/val/test assignment."""

from __future__ import annotations

from skillopt_sleep.models import Task
from skillopt_sleep.night.split import assign_splits, stable_hash


def task(i: int, *, synthetic: bool = False) -> Task:
    return Task(id=f"task{i:02d}", intent=f"intent {i}", synthetic=synthetic)


def splits(tasks: list[Task]) -> dict[str, str]:
    return {t.id: t.split for t in tasks}


def test_stable_hash_is_in_unit_interval_and_deterministic() -> None:
    values = [stable_hash(f"t{i}") for i in range(50)]
    assert all(0.0 <= v < 1.0 for v in values)
    assert values == [stable_hash(f"t{i}") for i in range(50)]
    assert len(set(values)) == 50


def test_three_tasks_give_one_val_one_test_one_train() -> None:
    out = assign_splits([task(1), task(2), task(3)], {}, 0.25, 0.25)
    assert sorted(t.split for t in out) == ["test", "train", "val"]
    # the lowest hash goes to test, the next to val
    by_hash = sorted(out, key=lambda t: stable_hash(t.id))
    assert [t.split for t in by_hash] == ["test", "val", "train"]


def test_fewer_than_three_tasks_all_train() -> None:
    assert [t.split for t in assign_splits([task(1), task(2)], {}, 0.25, 0.25)] == [
        "train",
        "train",
    ]


def test_fractions_are_respected_for_many_tasks() -> None:
    out = assign_splits([task(i) for i in range(20)], {}, 0.25, 0.25)
    counts = {s: sum(t.split == s for t in out) for s in ("train", "val", "test")}
    assert counts == {"train": 10, "val": 5, "test": 5}


def test_order_of_input_does_not_change_assignment() -> None:
    tasks = [task(i) for i in range(10)]
    a = splits(assign_splits(tasks, {}, 0.2, 0.2))
    b = splits(assign_splits(list(reversed(tasks)), {}, 0.2, 0.2))
    assert a == b
    assert [t.id for t in assign_splits(tasks, {}, 0.2, 0.2)] == [t.id for t in tasks]


def test_previous_splits_are_kept_and_new_tasks_fill_quotas() -> None:
    first = splits(assign_splits([task(i) for i in range(4)], {}, 0.25, 0.25))
    out = splits(assign_splits([task(i) for i in range(8)], first, 0.25, 0.25))
    for tid, split in first.items():
        assert out[tid] == split
    counts = {s: sum(v == s for v in out.values()) for s in ("train", "val", "test")}
    assert counts == {"train": 4, "val": 2, "test": 2}


def test_previous_val_test_never_moves_even_if_over_quota() -> None:
    previous = {"task00": "test", "task01": "test", "task02": "val"}
    out = splits(assign_splits([task(0), task(1), task(2), task(3)], previous, 0.25, 0.25))
    assert out == {"task00": "test", "task01": "test", "task02": "val", "task03": "train"}


def test_old_train_tasks_are_promoted_only_when_val_or_test_would_be_empty() -> None:
    previous = {"task00": "train", "task01": "train", "task02": "train"}
    out = splits(assign_splits([task(0), task(1), task(2)], previous, 0.25, 0.25))
    assert sorted(out.values()) == ["test", "train", "val"]
    # with a new task available, it is used first and old tasks stay put where possible
    out = splits(assign_splits([task(0), task(1), task(2), task(3)], previous, 0.25, 0.25))
    assert sum(v == "test" for v in out.values()) == 1
    assert sum(v == "val" for v in out.values()) == 1


def test_synthetic_tasks_are_always_train() -> None:
    tasks = [task(i, synthetic=True) for i in range(6)] + [task(10), task(11), task(12)]
    previous = {"task00": "val", "task01": "test"}
    out = assign_splits(tasks, previous, 0.25, 0.25)
    assert all(t.split == "train" for t in out if t.synthetic)
    real = [t.split for t in out if not t.synthetic]
    assert sorted(real) == ["test", "train", "val"]


def test_zero_fraction_disables_a_split() -> None:
    out = assign_splits([task(i) for i in range(6)], {}, 0.0, 0.25)
    assert not any(t.split == "val" for t in out)
    assert sum(t.split == "test" for t in out) == 2


def test_unscorable_tasks_get_no_split_and_take_no_slot() -> None:
    # the user trial: one corrected task and two recurring ones nothing can score
    tasks = [task(1), task(2), task(3)]
    ok = {"task01"}
    out = splits(assign_splits(tasks, {}, 0.25, 0.25, is_scorable=lambda t: t.id in ok))
    # one scorable task is too few to hold anything out: it trains; the others are unassigned
    assert out == {"task01": "train", "task02": "", "task03": ""}
    # a split stored for an unscorable task is not kept
    out = splits(
        assign_splits(
            tasks, {"task02": "val", "task03": "test"}, 0.25, 0.25, is_scorable=lambda t: t.id in ok
        )
    )
    assert out == {"task01": "train", "task02": "", "task03": ""}


def test_a_task_gets_a_split_by_the_quota_rule_once_it_is_scorable() -> None:
    tasks = [task(i) for i in range(4)]
    first = splits(assign_splits(tasks, {}, 0.25, 0.25, is_scorable=lambda t: t.id != "task03"))
    assert first["task03"] == "" and sorted(first.values()) == ["", "test", "train", "val"]
    # now scorable: the three keep their splits, the newcomer fills what the quotas leave
    second = splits(assign_splits(tasks, {k: v for k, v in first.items() if v}, 0.25, 0.25))
    assert {k: second[k] for k in first if first[k]} == {k: v for k, v in first.items() if v}
    assert second["task03"] == "train"
    assert second == splits(
        assign_splits(
            tasks, {k: v for k, v in first.items() if v}, 0.25, 0.25, is_scorable=lambda t: True
        )
    )
