"""The one pause of the cyclic garbage collector: off inside, restored after, nesting, exceptions."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from desched.gcpause import gc_paused


@pytest.fixture(autouse=True)
def _restore_gc() -> Iterator[None]:
    was = gc.isenabled()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


def test_paused_inside_and_enabled_after() -> None:
    gc.enable()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_an_inner_pause_leaves_the_outer_one_in_force() -> None:
    gc.enable()
    with gc_paused():
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_disabled_before_stays_disabled() -> None:
    gc.disable()
    with gc_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_an_exception_still_restores_the_collector() -> None:
    gc.enable()
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_usable_as_a_decorator() -> None:
    @gc_paused()
    def inside() -> bool:
        return gc.isenabled()

    gc.enable()
    assert inside() is False
    assert gc.isenabled()
