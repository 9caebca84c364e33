"""The host side: tensor layouts, compiled programs, program files and devices."""

from runtime.device import Device, DeviceResult, InputError, ProgramError
from runtime.layout import LAYOUTS, LayoutError, pack, packed_nbytes, packed_shape, unpack
from runtime.program import FORMAT_VERSION, Program, TensorRegion
from runtime.program_file import ProgramFileError, load, save

__all__ = ["Device", "DeviceResult", "InputError", "ProgramError", "LAYOUTS", "LayoutError",
           "pack", "unpack", "packed_shape", "packed_nbytes", "FORMAT_VERSION", "Program",
           "TensorRegion", "ProgramFileError", "load", "save"]
