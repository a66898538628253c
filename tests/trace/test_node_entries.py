"""Node entries are compact read-only records (uopviz.trace.nodes.Node), made while a trace's JSON is parsed, that
read as the dicts a document holds."""

from __future__ import annotations

import json

import numpy as np
import pytest

import uopviz
from uopviz import Tensor
from uopviz.trace import Trace, TraceFormatError
from uopviz.trace.nodes import Node


def recorded() -> Trace:
    with uopviz.trace() as tr:
        x = Tensor(np.arange(16, dtype=np.float32).reshape(4, 4))
        (x @ x.T + 1).sum().numpy()
    return tr


def test_parsed_entries_are_nodes_that_read_and_write_as_the_document() -> None:
    tr = recorded()
    doc = json.loads(tr.to_json())
    back = Trace.from_json(tr.to_json())
    assert back.nodes and all(type(e) is Node for e in back.nodes.values())
    assert {k: e.to_dict() for k, e in back.nodes.items()} == doc["nodes"]
    assert json.loads(back.to_json())["nodes"] == doc["nodes"]
    with_device = [k for k, e in doc["nodes"].items() if "device" in e]
    without = [k for k, e in doc["nodes"].items() if "device" not in e]
    assert with_device and without  # both kinds, so the optional field is checked both ways
    for k in with_device[:3] + without[:3]:
        e = back.nodes[k]
        assert e.to_dict() == doc["nodes"][k] == back.node(k) and len(e) == len(doc["nodes"][k])
        assert dict(e) == {**doc["nodes"][k], "src": tuple(doc["nodes"][k]["src"])}
        assert ("device" in e) == ("device" in doc["nodes"][k]) and e.get("device") == doc["nodes"][k].get("device")
        assert type(back.node(k)) is dict and type(back.node(k)["src"]) is list
    with pytest.raises(KeyError):
        back.nodes[without[0]]["device"]


def test_a_document_of_dicts_makes_nodes_too() -> None:
    doc = recorded().to_dict()
    tr = Trace.from_dict(doc)
    assert all(type(e) is Node for e in tr.nodes.values())
    assert all(type(e) is dict for e in doc["nodes"].values())  # the caller's document is left as it was


def test_an_entry_missing_a_field_is_named() -> None:
    doc = recorded().to_dict()
    nid = next(iter(doc["nodes"]))
    del doc["nodes"][nid]["tag"]
    with pytest.raises(TraceFormatError, match=rf"nodes\['{nid}'\]: missing field 'tag'"):
        Trace.from_json(json.dumps(doc))
