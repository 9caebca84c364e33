"""The host side: tensor layouts, compiled programs, program files, running accelerator programs."""

from vdla.runtime.errors import InputError, ProgramError
from vdla.runtime.layout import LAYOUTS, LayoutError, pack, packed_nbytes, packed_shape, unpack
from vdla.runtime.program import FORMAT_VERSION, Program, TensorRegion
from vdla.runtime.program_file import ProgramFileError, load, save
from vdla.runtime.runner import AccelRunner, ProgramResult

__all__ = ["AccelRunner", "ProgramResult", "InputError", "ProgramError", "LAYOUTS", "LayoutError",
           "pack", "unpack", "packed_shape", "packed_nbytes", "FORMAT_VERSION", "Program",
           "TensorRegion", "ProgramFileError", "load", "save"]
