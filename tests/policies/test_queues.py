"""The shared queue tree and placement rules (pipeline.policies.queues)."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.errors import UsageError
from pipeline.policies.queues import (
    HashGroups,
    QueueConfig,
    QueuePlacement,
    QueueTree,
    StaticGroups,
    groups_provider,
    parse_inline,
    parse_mappings,
)


def test_absolute_shares_top_down() -> None:
    tree = parse_inline("eng:60,eng.batch:50,eng.adhoc:50:80,ops:40:50")
    assert tree.leaf_names == ("root.ops", "root.eng.batch", "root.eng.adhoc")
    cap = dict(zip(tree.paths, tree.abs_cap, strict=True))
    mx = dict(zip(tree.paths, tree.abs_max, strict=True))
    assert cap["root.eng.batch"] == pytest.approx(0.3)
    assert mx["root.eng.adhoc"] == pytest.approx(0.8)
    assert mx["root.ops"] == pytest.approx(0.5)


def test_weights_follow_the_documented_example() -> None:
    tree = parse_inline("a:3w,b:2w,c:5w")
    assert tree.abs_cap[tree.leaves].tolist() == pytest.approx([0.3, 0.2, 0.5])
    tree = parse_inline("a:3w,b:2w,c:5w,d:10w")
    assert tree.abs_cap[tree.leaves].tolist() == pytest.approx([0.15, 0.1, 0.25, 0.5])


@pytest.mark.parametrize(("text", "message"), [
    ("a:50,b:40", "add up to 90"), ("a:50,b:2w", "mix percent and weight"),
    ("a:x", "not a number"), ("a:50,b:50:0", "maximum-capacity"),
    ("a:50:40,b:50", "below its capacity"), ("x.y:100", "no parent")])
def test_invalid_trees_are_usage_errors(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_inline(text)


def test_lookup_by_full_path_and_short_name() -> None:
    tree = QueueTree([QueueConfig("root.a", 50), QueueConfig("root.b", 50),
                      QueueConfig("root.a.x", 100), QueueConfig("root.b.x", 50),
                      QueueConfig("root.b.y", 50)])
    assert tree.find_leaf("root.b.y") == tree.find_leaf("y") == tree.leaf("b.y")
    assert tree.find_leaf("x") is None  # ambiguous
    assert tree.find_leaf("a") is None  # a parent
    with pytest.raises(UsageError, match="ambiguous"):
        tree.leaf("x")
    assert tree.prop(tree.index["root.a.x"], "k", 3) == 3


def test_mappings_trace_queue_and_default() -> None:
    tree = parse_inline("default:40,a:30,b:30")
    rules = parse_mappings("u:alice:a,g:eng:b")
    place = QueuePlacement(tree, rules, StaticGroups({"bob": ["eng"]}))
    table = place.table(["alice", "bob", "carol"], ["", "a", "default", "nope"])
    leaf = table.leaf(np.array([0, 1, 2, 2, 2, 1]), np.array([0, 0, 0, 1, 3, 1]))
    # alice->a, bob->b (group), carol->default, carol+trace a->a, unknown->default,
    # bob submitting to a: the trace queue wins when override is off (Hadoop default)
    assert [tree.leaf_names[i] for i in leaf] == [
        "root.a", "root.b", "root.default", "root.a", "root.default", "root.a"]
    over = QueuePlacement(tree, rules, StaticGroups({"bob": ["eng"]}), override=True)
    assert over.table(["bob"], ["a"]).leaf(np.array([0]), np.array([0]))[0] == tree.leaf("b")


def test_user_and_primary_group_targets() -> None:
    tree = parse_inline("g0:50,g1:50")
    place = QueuePlacement(tree, parse_mappings("u:%user:%user,u:%user:%primary_group"),
                           HashGroups(2))
    users = [f"user{i}" for i in range(40)] + ["g1"]
    leaf = place.table(users, [""]).leaf(np.arange(41), np.zeros(41, np.int64))
    expected = [int(HashGroups(2).groups(u)[0][1:]) for u in users[:40]]
    assert leaf[:40].tolist() == expected and 0 < sum(expected) < 40
    assert leaf[40] == tree.leaf("g1")  # u:%user:%user matches a queue named like the user


def test_static_mapping_to_a_missing_queue_is_an_error() -> None:
    with pytest.raises(UsageError, match="'nope' is not a leaf"):
        QueuePlacement(parse_inline("a:100"), parse_mappings("u:alice:nope"))
    with pytest.raises(UsageError, match="not u:user:queue"):
        parse_mappings("x:alice:a")


def test_groups_provider_forms() -> None:
    assert groups_provider("hash:4:t").groups("u") == HashGroups(4, "t").groups("u")
    assert groups_provider("a=x|y;b=z").groups("a") == ["x", "y"]
    with pytest.raises(UsageError):
        groups_provider("hash:0")
