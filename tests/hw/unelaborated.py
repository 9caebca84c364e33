# amaranth: UnusedElaboratable=no
"""Components built never to be elaborated: to see that their constructor refuses a config,
or which variant it chose where no function names it.

Amaranth warns (``UnusedElaboratable``) when an elaboratable it never elaborated is
collected. The option on this file's first line, which Amaranth's own tests use for the
same purpose, turns that off for the components built here, and for no others; a test
that only needs a component's ports or variant asks the function that gives them
(`hw.load.load_ports`, `hw.sequencer.ends_variant`, ...) and builds nothing.
"""

from __future__ import annotations

__all__ = ["built"]


def built(component, *args, **kwargs):
    """``component(*args, **kwargs)``, which will not be elaborated (it may raise)."""
    return component(*args, **kwargs)
