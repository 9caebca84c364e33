"""The accelerator: its configuration, instruction set and Amaranth RTL."""

# Load the config before the ISA: building the presets checks them against the
# ISA's formats, so this order lets either module be imported first.
from vdla.hw import config as _config  # noqa: F401
