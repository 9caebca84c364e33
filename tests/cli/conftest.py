"""Fixtures of the CLI tests: the session-wide RTL builds of `tests.rtl.conftest`
(one build per session there; here a cache hit) for ``vdla hw model``."""

from tests.rtl.conftest import chip_build, tiny  # noqa: F401  (pytest fixtures)
