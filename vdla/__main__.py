"""``python -m vdla``: the same command as the ``vdla`` script."""

from vdla.cli.main import main

main()
