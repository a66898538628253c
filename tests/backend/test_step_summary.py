"""A whole-graph step's summary of the kinds it removed and added (backend/views.py): net, so a kind on both sides
as often is not named twice as if it changed (devectorize read "Where float32(16) ×27 → Where float32(16) ×27")."""

from __future__ import annotations

from collections import Counter

from uopviz.backend.views import _kinds_changed


def test_vectors_split_into_lanes_are_said_as_kinds_that_left_and_came() -> None:
    gone = Counter({"Where float32(16)": 27, "Group void": 1})
    came = Counter({"Where float32": 432, "Group void": 1})
    assert _kinds_changed(gone, came) == ["Where float32(16) ×27 → Where float32 ×432",
                                          "1 node removed and added again as the same kinds"]


def test_a_kind_on_both_sides_says_its_count_once() -> None:
    gone = Counter({"Add index(16)": 14, "Group void": 1})
    came = Counter({"Add index(16)": 17, "Group void": 1})
    assert _kinds_changed(gone, came) == ["Add index(16) ×14 → ×17",
                                          "15 nodes removed and added again as the same kinds"]


def test_nothing_added_reads_nothing() -> None:
    assert _kinds_changed(Counter({"Store void": 2}), Counter()) == ["Store void ×2 → nothing"]
