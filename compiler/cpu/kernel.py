"""A compiled CPU kernel in-process: weight packing, the ctypes call, references.

`CpuKernel` generates the C of one layer (`compiler.cpu.codegen`; it takes
no C from elsewhere, so only code vdla generated is ever built), builds it
(`compiler.cpu.build`, cached), loads it with ctypes, packs weights once
(`set_weights`) and runs on activations (`run`), NCHW (or dense ``(M, K)``) in
and out, exactly the tensors the accelerator's programs take. The activation
packing happens inside the timed C call, so a run's time is the whole layer.
"""

from __future__ import annotations

import ctypes

import numpy as np

from vdla.compiler.cpu.build import build_library, cpu_features
from vdla.compiler.cpu.codegen import generate_op_c
from vdla.compiler.cpu.schedule import (CPU_MODES, CpuProblem, CpuSchedule, default_cpu_schedule,
                                        epilogue_entries)
from vdla.compiler.errors import ShapeError, check_mode
from vdla.ints import round_up

__all__ = ["CpuKernel", "dtypes_of", "reference_fp32"]


def dtypes_of(mode: str) -> dict[str, np.dtype]:
    """The dtypes of ``data``, ``weight``, ``bias``, ``residual`` (int8 mode) and ``out``
    in ``mode``."""
    if mode == "int8":
        return {"data": np.dtype(np.int8), "weight": np.dtype(np.int8),
                "bias": np.dtype(np.int32), "residual": np.dtype(np.int8),
                "out": np.dtype(np.int8)}
    return {name: np.dtype(np.float32) for name in ("data", "weight", "bias", "out")}


def reference_fp32(op, data: np.ndarray, weight: np.ndarray,
                   bias: np.ndarray | None = None) -> np.ndarray:
    """numpy float64 result of ``op`` in fp32 mode: ``relu((acc + bias) * 2**-shift)``."""
    if op.kind == "dense":
        acc = np.asarray(data, np.float64) @ np.asarray(weight, np.float64).T
    else:
        acc = op.accumulate(data, weight, np.float64)
    if op.bias:
        acc = acc + np.asarray(bias, np.float64).reshape((1, -1) + (1,) * (acc.ndim - 2))
    acc = acc * 2.0 ** -min(op.shift, 31)
    return np.maximum(acc, 0) if op.relu else acc


class CpuKernel:
    """One layer compiled for this CPU.

    Parameters
    ----------
    op : compiler.ops.Conv2d or compiler.ops.Dense
    mode : str
        ``"int8"`` (bit-exact with the accelerator) or ``"fp32"``.
    schedule : CpuSchedule, optional
        The knobs; `default_cpu_schedule` otherwise.
    flags : tuple of str, optional
        Compiler flags instead of `compiler.cpu.build.compiler_flags` (e.g.
        ``("-O3",)`` builds the portable vector path on any x86-64).

    Raises
    ------
    ScheduleError
        For an unknown mode or a schedule this CPU cannot run (e.g. 16 lanes
        without AVX-512).
    compiler.cpu.build.CpuBuildError
        When the C compiler fails.
    """

    def __init__(self, op, mode: str = "int8", schedule: CpuSchedule | None = None,
                 flags: tuple[str, ...] | None = None):
        check_mode(mode, CPU_MODES)
        self.op, self.mode = op, mode
        self.problem = CpuProblem.from_op(op)
        features = cpu_features()
        self.schedule = schedule or default_cpu_schedule(self.problem, mode, features)
        self.source = generate_op_c(op, mode, self.schedule)
        self.library_path = build_library(self.source, flags)
        self._library = ctypes.CDLL(str(self.library_path))
        self._library.vdla_isa.restype = ctypes.c_char_p
        self._library.vdla_packed_elements.restype = ctypes.c_size_t
        self._library.vdla_run.restype = None
        if op.residual_shift is not None:
            self._library.vdla_run_residual.restype = None
        self.isa = self._library.vdla_isa().decode()
        self.dtypes = dtypes_of(mode)
        # The packed input's elements: offset bytes, or 32-bit lanes for the
        # depthwise kernel (`compiler.cpu.depthwise`), or floats.
        element = np.float32 if mode == "fp32" else np.int32 if self.problem.depthwise \
            else np.uint8
        # 64-byte aligned workspace; its padding is written once by vdla_init.
        count = self._library.vdla_packed_elements()
        raw = np.zeros(count * np.dtype(element).itemsize + 64, dtype=np.uint8)
        start = (-raw.ctypes.data) % 64
        self._packed = raw[start:start + count * np.dtype(element).itemsize].view(element)
        self._library.vdla_init(self._packed.ctypes.data_as(ctypes.c_void_p))
        self._weight = self._epilogue = None

    def set_weights(self, weight: np.ndarray, bias: np.ndarray | None = None) -> None:
        """Pack ``weight`` (KCHW or dense ``(N, K)``) and fold ``bias`` into the epilogue
        (with per-channel multipliers, ``bias`` holds them after the biases)."""
        weight = np.asarray(weight, dtype=self.dtypes["weight"])
        if weight.ndim == 2:
            weight = weight[:, :, None, None]
        k, c, kh, kw = weight.shape
        multipliers = None
        if self.op.per_channel:
            bias, multipliers = np.asarray(bias)[:k], np.asarray(bias)[k:]
        if self.problem.depthwise:
            self._set_depthwise_weights(weight, bias)
        else:
            self._set_weights(weight, bias)
        if multipliers is not None:  # after the biases, laid out as they are
            self._epilogue = np.concatenate([self._epilogue, self._lay_out(
                np.asarray(multipliers, np.int32))])

    def _lay_out(self, vector: np.ndarray) -> np.ndarray:
        """A per-channel vector as the C reads the epilogue vector (`epilogue_entries`)."""
        k = self.problem.out_channels
        if self.problem.depthwise:
            laid = np.zeros(epilogue_entries(self.problem, self.schedule), vector.dtype)
            laid[:k] = vector
            return laid
        # Per group padded to its whole tiles, then by a vector: the epilogue
        # loads LANES values at a time.
        groups = self.problem.groups
        per_group = np.zeros((groups, round_up(k // groups, self.schedule.oc_block)),
                             dtype=vector.dtype)
        per_group[:, :k // groups] = vector.reshape(groups, -1)
        return np.concatenate([per_group.ravel(), np.zeros(self.schedule.lanes, vector.dtype)])

    def _set_weights(self, weight: np.ndarray, bias: np.ndarray | None) -> None:
        schedule = self.schedule
        k, c, kh, kw = weight.shape
        groups = self.problem.groups
        ocb, icb = schedule.oc_block, schedule.ic_block
        # Each group's output channels pad to whole register tiles, its input
        # channels to whole channel blocks (the C's KB and CB are per group).
        kp, cp = round_up(k // groups, ocb), round_up(c, icb)
        padded = np.zeros((groups, kp, cp, kh, kw), dtype=weight.dtype)
        padded[:, :k // groups, :c] = weight.reshape(groups, k // groups, c, kh, kw)
        if self.mode == "int8":
            blocks = padded.reshape(groups, kp // ocb, ocb, cp // icb, icb // 4, 4, kh, kw)
            self._weight = np.ascontiguousarray(blocks.transpose(0, 1, 3, 6, 7, 4, 2, 5))
            # acc holds sum((x + 128) * w): take 128 * sum(w) back out, wrapping like int32.
            correction = 128 * weight.astype(np.int64).sum(axis=(1, 2, 3))
            bias64 = (np.asarray(bias, np.int64) if bias is not None
                      else np.zeros(k, np.int64))
            epilogue = ((bias64 - correction) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
        else:
            blocks = padded.reshape(groups, kp // ocb, ocb, cp // icb, icb, kh, kw)
            self._weight = np.ascontiguousarray(blocks.transpose(0, 1, 3, 5, 6, 4, 2))
            epilogue = (np.asarray(bias, np.float32) if bias is not None
                        else np.zeros(k, np.float32))
        self._epilogue = self._lay_out(epilogue)

    def _set_depthwise_weights(self, weight: np.ndarray, bias: np.ndarray | None) -> None:
        """`compiler.cpu.depthwise`'s layout: ``C/LANES KH KW LANES`` lanes, the bias as is."""
        lanes, (k, _, kh, kw) = self.schedule.lanes, weight.shape
        lane_type = np.int32 if self.mode == "int8" else np.float32
        padded = np.zeros((round_up(k, lanes), kh, kw), dtype=lane_type)
        padded[:k] = weight[:, 0]
        self._weight = np.ascontiguousarray(
            padded.reshape(-1, lanes, kh, kw).transpose(0, 2, 3, 1))
        self._epilogue = self._lay_out(np.zeros(k, lane_type) if bias is None
                                       else np.asarray(bias, lane_type))

    def run(self, data: np.ndarray, threads: int = 2, out: np.ndarray | None = None,
            residual: np.ndarray | None = None) -> np.ndarray:
        """Compute the layer on ``data`` with the weights of `set_weights`.

        Parameters
        ----------
        data : numpy.ndarray
            NCHW activations (dense: ``(M, K)``) of the mode's dtype.
        threads : int
            Threads (the caller's included).
        out : numpy.ndarray, optional
            A C-contiguous output array to reuse.
        residual : numpy.ndarray, optional
            The int8 residual of the output's shape, for (and only for) a layer with
            ``residual_shift``.
        """
        if self._weight is None:
            raise ShapeError("CpuKernel.run: call set_weights first")
        data = np.ascontiguousarray(data, dtype=self.dtypes["data"])
        if data.shape != tuple(self.op.geometry().shapes["data"]):
            raise ShapeError(f"data: expected shape {self.op.geometry().shapes['data']}, "
                             f"got {data.shape}")
        if out is None:
            out = np.empty(self.op.output_shape, dtype=self.dtypes["out"])
        elif (not isinstance(out, np.ndarray) or out.dtype != self.dtypes["out"]
              or out.shape != tuple(self.op.output_shape) or not out.flags.c_contiguous):
            raise ShapeError(f"out: expected a C-contiguous {self.dtypes['out'].name} array of "
                             f"shape {tuple(self.op.output_shape)}")
        pointer = ctypes.c_void_p
        arguments = (data.ctypes.data_as(pointer), self._weight.ctypes.data_as(pointer),
                     self._epilogue.ctypes.data_as(pointer), out.ctypes.data_as(pointer),
                     self._packed.ctypes.data_as(pointer), ctypes.c_int(threads))
        if self.op.residual_shift is None:
            if residual is not None:
                raise ShapeError("residual: this layer takes none (residual_shift is None)")
            self._library.vdla_run(*arguments)
            return out
        if not isinstance(residual, np.ndarray) or residual.dtype != np.int8 \
                or residual.shape != tuple(self.op.output_shape):
            raise ShapeError(f"residual: expected an int8 array of shape "
                             f"{tuple(self.op.output_shape)}")
        residual = np.ascontiguousarray(residual)
        self._library.vdla_run_residual(*arguments, residual.ctypes.data_as(pointer))
        return out
