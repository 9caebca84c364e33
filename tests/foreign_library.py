"""A shared library that is not vdla's: loading it runs its constructor, which writes a
marker file. Cache tests put it in place of a cached library and check it never runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SOURCE = """
#include <stdio.h>
__attribute__((constructor)) static void leave_mark(void) {
    FILE *f = fopen("%s", "w");
    if (f) { fputs("foreign code ran", f); fclose(f); }
}
int answer(void) { return 666; }
"""


def foreign_library(folder: Path) -> tuple[Path, Path]:
    """Compile the library into ``folder``; returns (library, marker file it would write)."""
    marker = folder / "foreign-code-ran"
    (folder / "foreign.c").write_text(SOURCE % marker)
    library = folder / "foreign.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(library), str(folder / "foreign.c")],
                   check=True)
    # It is a working library: loading it does run its code (in another process).
    subprocess.run([sys.executable, "-c", f"import ctypes; ctypes.CDLL({str(library)!r})"],
                   check=True)
    assert marker.read_text() == "foreign code ran"
    marker.unlink()
    return library, marker
