"""`tests.hw.unelaborated`: a component built there and never elaborated warns nothing, while
one built anywhere else still does (so the suite's runs stay free of ``UnusedElaboratable``)."""

from __future__ import annotations

import gc
import warnings

import pytest
from amaranth.hdl import Fragment, Module, UnusedElaboratable

from vdla.hw.alu import VectorAlu
from vdla.hw.compute import Compute
from tests.hw.amaranth_sim import TINY
from tests.hw.unelaborated import built


def _unused_warnings(make) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        make()
        gc.collect()
    return [str(warning.message) for warning in caught if warning.category is UnusedElaboratable]


def test_only_components_built_there_go_unreported():
    Fragment.get(Module(), None)   # Amaranth reports none before a first elaboration
    assert _unused_warnings(lambda: built(Compute, TINY).in_flight_kind) == []

    def refused():
        with pytest.raises(ValueError, match=r"^VectorAlu: config two needs TwoCycleAlu"):
            built(VectorAlu, TINY.replace(two_cycle_alu=1, name="two"))
    assert _unused_warnings(refused) == []
    [message] = _unused_warnings(lambda: Compute(TINY).in_flight_kind)
    assert message.startswith("<vdla.hw.compute.Compute object at ") and \
        message.endswith("> created but never used")
