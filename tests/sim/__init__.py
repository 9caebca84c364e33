# hw.config must be imported before hw.isa (their import cycle fails the other way round).
import hw.config  # noqa: F401
