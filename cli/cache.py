"""``vdla cache``: the build cache's size by kind, and pruning it by age or to a size.

Without options it prints the cache root (`vdla.cache.cache_root`), each kind's
size (`vdla.cache.KINDS`) and how many of its items could be removed.
``--older-than DAYS`` removes what was not used for that many days,
``--max-size SIZE`` the least recently used items until the cache holds at
most SIZE; ``--dry-run`` lists what would go and removes nothing; ``--json``
prints the report as JSON. Whatever goes is built again when next needed;
`vdla.cache` says what is never removed (an entry being built, Fmax records,
anything that is not vdla's) and how an entry is removed without a reader
ever seeing half of it.
"""

from __future__ import annotations

import json
import re

import click

from vdla.cli.options import Command, Number, fail

UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"(\d+(?:\.\d*)?)\s*([KMGT]?)(?:i?B)?", re.IGNORECASE)


class Size(click.ParamType):
    """A size in bytes: ``500M``, ``2G``, ``1.5GiB``, ``4096`` (K, M, G, T: powers of 1024)."""

    name = "size"

    def convert(self, value, param, ctx) -> int:
        if isinstance(value, int):
            return value
        match = _SIZE.fullmatch(str(value).strip())
        if match is None:
            fail(f"--max-size: expected a size such as 500M or 2G (K, M, G, T: powers of 1024), "
                 f"got {value!r}")
        return int(float(match.group(1)) * UNITS[match.group(2).upper()])


def human(size: int) -> str:
    """``size`` bytes in binary units: ``785.2 MiB``."""
    for unit in ("T", "G", "M", "K"):
        if size >= UNITS[unit]:
            return f"{size / UNITS[unit]:.1f} {unit}iB"
    return f"{size} B"


def _noun(number: int, singular: str, plural: str) -> str:
    return singular if number == 1 else plural


def _items(items) -> list[dict]:
    return [{"kind": item.kind, "path": str(item.path), "bytes": item.bytes,
             "last_used": item.used} for item in items]


def _report(usage, pruned) -> dict:
    from vdla.cache import KINDS
    report = {"root": str(usage.root), "bytes": usage.bytes,
              "kinds": {name: {"what": KINDS.get(name, "not vdla's: left alone"), "bytes": size,
                               "items": count}
                        for name, (size, count) in usage.kinds.items()}}
    if pruned is not None:
        report["pruned"] = {"dry_run": pruned.dry_run, "removed": _items(pruned.removed),
                            "busy": _items(pruned.busy), "freed_bytes": pruned.freed,
                            "bytes_after": pruned.after}
    return report


def _usage_lines(usage) -> list[str]:
    from vdla.cache import KINDS
    if not usage.kinds:
        return [f"cache {usage.root}: empty"]
    lines = [f"cache {usage.root}: {human(usage.bytes)}"]
    order = [name for name in (*KINDS, "other") if name in usage.kinds]
    for name in order:
        size, count = usage.kinds[name]
        what = KINDS.get(name, "not vdla's: left alone")
        items = _noun(count, "item", "items")
        lines.append(f"  {name:<8} {human(size):>11}  {count:>5} {items:<5}  {what}")
    return lines


def _pruned_lines(pruned, max_bytes) -> list[str]:
    verb = "would remove" if pruned.dry_run else "removed"
    by_kind: dict[str, int] = {}
    for item in pruned.removed:
        by_kind[item.kind] = by_kind.get(item.kind, 0) + 1
    kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(by_kind.items()))
    count = len(pruned.removed)
    lines = [f"{verb} {count} {_noun(count, 'item', 'items')}, {human(pruned.freed)}"
             + (f" ({kinds})" if kinds else "")
             + f": the cache {'would hold' if pruned.dry_run else 'holds'} {human(pruned.after)}"]
    if pruned.busy:
        busy = len(pruned.busy)
        lines.append(f"left {busy} {_noun(busy, 'entry', 'entries')} alone: being built or "
                     "healed now")
    if max_bytes is not None and pruned.after > max_bytes:
        lines.append(f"still over --max-size {human(max_bytes)}: what is left is not removable "
                     "(entries in use, Fmax records, what is not vdla's)")
    return lines


@click.command("cache", cls=Command)
@click.option("--older-than", type=Number(), default=None, metavar="DAYS",
              help="Remove what was not used for DAYS days (fractions allowed).")
@click.option("--max-size", type=Size(), default=None, metavar="SIZE",
              help="Remove the least recently used items until the cache holds at most SIZE "
                   "(500M, 2G; powers of 1024).")
@click.option("--dry-run", is_flag=True, help="List what would be removed; remove nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
def command(older_than, max_size, dry_run, as_json):
    """Show the build cache's size by kind, or prune it."""
    from vdla import cache
    if older_than is not None and older_than < 0:
        fail(f"--older-than: must be 0 or more days, got {older_than:g}")
    if dry_run and older_than is None and max_size is None:
        fail("--dry-run: give --older-than or --max-size, whose pruning it shows")
    pruned = None
    if older_than is not None or max_size is not None:
        pruned = cache.prune(older_than=None if older_than is None else older_than * 86400,
                             max_bytes=max_size, dry_run=dry_run)
        usage = pruned.before
    else:
        usage = cache.usage()
    if as_json:
        click.echo(json.dumps(_report(usage, pruned)))
        return
    for line in _usage_lines(usage):
        click.echo(line)
    if pruned is not None:
        if dry_run:
            for item in pruned.removed:
                click.echo(f"  {human(item.bytes):>11}  {item.path}")
        for line in _pruned_lines(pruned, max_size):
            click.echo(line)
