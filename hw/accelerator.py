"""The accelerator top: fetch, load, compute and store around one DRAM port.

Dataflow: ``start`` latches the program's address and length; the cycle after,
every block restarts from reset (SRAM contents are kept) and fetch begins
reading instructions and dispatching them into the load, compute and store
command queues. The three modules run concurrently and synchronise only
through the four dependency-token queues (load->compute, compute->load,
compute->store, store->compute). Load writes the inp and wgt SRAMs, compute
reads them and writes acc (private) and out, store reads out. All DRAM reads
(fetch, load inp / wgt, compute uop / acc) go through the round-robin
`DramArbiter`; the store module owns the write side.

Port contract (fixed; the Verilator DRAM model, the ctypes binding and the
cocotb benches are written against it). All signals are synchronous to
``clk``; ``rst`` is the synchronous reset. In Verilog, stream members are
flattened with ``__`` and payloads are flat vectors, struct members packed from
bit 0 (``addr`` in the low bits of a request).

``start`` (in, 1)
    One-cycle pulse: latches ``insn_addr`` and ``insn_count``, clears ``done``
    and the counters, and starts the program. Pulse it only when the
    accelerator is idle (after reset or once ``done`` is high).
``insn_addr`` (in, 32)
    Byte address of the first instruction, 16-byte aligned.
``insn_count`` (in, 32)
    Number of 16-byte instructions.
``done`` (out, 1)
    Level: high once FINISH has retired on compute, all ``insn_count``
    instructions have been dispatched, the load and store command queues are
    empty with both modules idle and every store beat has been accepted
    (with a write response: every store burst answered);
    stays high until the next ``start``. A program without FINISH never
    raises it.
``mem_rd_req__valid`` (out), ``mem_rd_req__ready`` (in), ``mem_rd_req__payload`` (out, 48)
    Burst read request: ``addr`` = payload[31:0], a byte address aligned to
    the bus width; ``beats`` = payload[47:32], at least 1, legal on the
    config's memory system (`hw.layouts.legal_burst`: at most its longest
    burst, never across its boundary, 4 KB on AXI).
``mem_rd_data__valid`` (in), ``mem_rd_data__ready`` (out), ``mem_rd_data__payload`` (in, bus bits)
    Read data beats in request order. The memory may insert any latency
    before and between beats; the accelerator may hold ``ready`` low.
    Several read bursts may be outstanding.
``mem_wr_req__valid`` (out), ``mem_wr_req__ready`` (in), ``mem_wr_req__payload`` (out, 48)
    Burst write request, same layout as a read request. Its ``beats`` data
    beats follow on ``mem_wr_data``; the next request is only issued after the
    last beat of the previous burst.
``mem_wr_data__valid`` (out), ``mem_wr_data__ready`` (in), ``mem_wr_data__payload`` (out, bus + bus/8)
    ``data`` = payload[bus-1:0], ``strb`` = payload[bus + bus/8 - 1:bus], one
    strobe bit per byte. Without a write response (``ideal`` memory) a beat
    is applied when accepted.
``mem_wr_resp__valid`` (in), ``mem_wr_resp__ready`` (out), ``mem_wr_resp__payload`` (in, 2)
    Only on a memory system with write responses (`hw.config.MemorySystem`):
    one per write burst, in order, once its bytes are visible to reads
    (AXI's B channel; the payload is BRESP, not looked at).
``counter_<name>`` (out, 32) for each name of `hw.counters.rtl_counters` (config)
    Event counters, cleared by ``start``; ``cycles`` counts from start to done.
``status_<name>`` (out, `hw.counters.STATUS_BITS`) for each name of `hw.counters.RTL_STATUS`
    Token and command queue occupancies, instructions fetched and retired.
``activity_<module>`` (out, 2) for each module of `hw.counters.RTL_ACTIVITY`
    The module's state this cycle, an index into `hw.counters.ACTIVITY_STATES`
    (0 idle, 1 busy, 2 waiting on a token, 3 waiting on memory); the module's
    counters count these states.
"""

from __future__ import annotations

from amaranth import Module, Mux, ResetInserter, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from vdla.hw.banked_memory import BankedMemory, collision_attrs
from vdla.hw.compute import Compute
from vdla.hw.config import HwConfig
from vdla.hw.counters import (ACTIVITY_STATES, RTL_ACTIVITY, RTL_COUNTERS, RTL_STATUS, STATUS_BITS,
                              rtl_counters)
from vdla.hw.dram_arbiter import arbiter_variant
from vdla.hw.fetch import Fetch
from vdla.hw.isa import MODULES, TOKEN_QUEUES
from vdla.hw.layouts import dram_port_members
from vdla.hw.load import LoadUnit, SharedLoadEngine, reader_groups
from vdla.hw.store import StoreUnit
from vdla.hw.token_queue import TokenQueue

__all__ = ["Accelerator", "AcceleratorSignature"]

# Read clients of the arbiter, in arbitration order (with ``shared_load_engine``:
# fetch and the shared engine's readers, `read_clients`).
READ_CLIENTS = ("fetch", "load_inp", "load_wgt", "compute_uop", "compute_acc")


class _OwnEngines:
    """Load and compute run their LOADs on engines of their own (`hw.load.LoadUnit`,
    `hw.compute.Compute`): their readers are the arbiter's read clients beside
    fetch's, and the load module writes inp and wgt."""

    @staticmethod
    def read_clients(config: HwConfig) -> tuple[str, ...]:
        return READ_CLIENTS

    @staticmethod
    def build(accelerator: "Accelerator", m: Module, fetch, load, compute):
        """The arbiter's read clients by name, and the block that writes inp and wgt."""
        clients = {"fetch": fetch.mem, "load_inp": load.mem_inp, "load_wgt": load.mem_wgt,
                   "compute_uop": compute.mem_uop, "compute_acc": compute.mem_acc}
        return clients, load


class _SharedEngine(_OwnEngines):
    """``shared_load_engine``: one engine (`hw.load.SharedLoadEngine`, a block of the
    top) runs load's and compute's LOADs and writes every SRAM they load; its readers
    are the arbiter's read clients beside fetch's."""

    @staticmethod
    def read_clients(config):
        return ("fetch", *(f"engine_{kind}"
                           for kind in reader_groups(config, SharedLoadEngine.KINDS)))

    @staticmethod
    def build(accelerator, m, fetch, load, compute):
        config = accelerator.config
        engine = accelerator._block(m, "engine", SharedLoadEngine(config))
        connect(m, load.engine, engine.clients[0])
        connect(m, compute.engine, engine.clients[1])
        connect(m, engine.sram_uop, compute.sram_uop)
        connect(m, engine.sram_acc, compute.sram_acc)
        clients = {"fetch": fetch.mem}
        clients.update({f"engine_{kind}": getattr(engine, f"mem_{kind}")
                        for kind in reader_groups(config, SharedLoadEngine.KINDS)})
        return clients, engine


def _engines_variant(config: HwConfig) -> type[_OwnEngines]:
    return _SharedEngine if config.shared_load_engine else _OwnEngines


def read_clients(config: HwConfig) -> tuple[str, ...]:
    """The DRAM arbiter's read clients for ``config``, in arbitration order."""
    return _engines_variant(config).read_clients(config)


class AcceleratorSignature(wiring.Signature):
    """The accelerator's ports: the port contract of the module docstring."""

    def __init__(self, config: HwConfig):
        members = {
            "start": In(1),
            "insn_addr": In(32),
            "insn_count": In(32),
            "done": Out(1),
            **dram_port_members(config),
        }
        members.update({f"counter_{name}": Out(32) for name in rtl_counters(config)})
        members.update({f"status_{name}": Out(STATUS_BITS) for name in RTL_STATUS})
        members.update({f"activity_{name}": Out(2) for name in RTL_ACTIVITY})
        super().__init__(members)


class Accelerator(wiring.Component):
    """The whole accelerator for one `HwConfig` (see the module docstring for ports)."""

    def __init__(self, config: HwConfig):
        self.config = config
        self.engines_kind = _engines_variant(config)
        super().__init__(AcceleratorSignature(config))

    def elaborate(self, platform):
        m = Module()
        config = self.config
        go, insn_addr, insn_count = self._restart(m)
        fetch = self._block(m, "fetch", Fetch(config))
        load = self._block(m, "load", LoadUnit(config))
        compute = self._block(m, "compute", Compute(config))
        store = self._block(m, "store", StoreUnit(config))
        arbiter = self._block(m, "arbiter", arbiter_variant(config)(config,
                                                                    len(read_clients(config))))
        queues = {name: self._block(m, f"tokens_{name}", TokenQueue(
                      config.token_queue_depth, registered_valid=bool(config.registered_dispatch)))
                  for name in TOKEN_QUEUES.values()}
        units = dict(zip(MODULES, (load, compute, store)))
        m.d.comb += [fetch.go.eq(go), fetch.insn_addr.eq(insn_addr),
                     fetch.insn_count.eq(insn_count)]
        sram_writer = self._memory_port(m, fetch, load, compute, store, arbiter)
        self._queues(m, fetch, units, queues)
        self._shared_srams(m, sram_writer, compute, store)
        running = self._done(m, go, fetch, load, compute, store)
        events = self._activity(m, units, running)
        events.update({
            "gemm_uops": compute.gemm_uop, "alu_uops": compute.alu_uop,
            "gemm_busy": compute.gemm_busy, "alu_busy": compute.alu_busy,
            "dram_read_beats": arbiter.read_beats, "dram_write_beats": arbiter.write_beats,
        })
        self._counters(m, events)
        self._status(m, fetch, queues, units)
        return m

    def _block(self, m: Module, name: str, elaboratable):
        """Add ``elaboratable`` as the submodule ``name``, restarted from reset by ``start``."""
        m.submodules[name] = ResetInserter(self.start)(elaboratable)
        return elaboratable

    def _restart(self, m: Module):
        """``start`` latches the program; every block restarts from reset on it, and work
        begins the cycle after (``go``). Returns ``go`` and the program's address and
        instruction count."""
        go = Signal()
        insn_addr = Signal(32)
        insn_count = Signal(self.config.insn_count_bits)
        m.d.sync += go.eq(self.start)
        with m.If(self.start):
            m.d.sync += [insn_addr.eq(self.insn_addr), insn_count.eq(self.insn_count)]
        return go, insn_addr, insn_count

    def _memory_port(self, m: Module, fetch, load, compute, store, arbiter):
        """The DRAM port: the read clients through the arbiter, the store module on its
        write side. Returns the block that writes the inp and wgt SRAMs."""
        clients, sram_writer = self.engines_kind.build(self, m, fetch, load, compute)
        for index, name in enumerate(read_clients(self.config)):
            connect(m, clients[name], arbiter.readers[index])
        connect(m, store.mem, arbiter.writer)
        connect(m, arbiter.mem_rd_req, flipped(self.mem_rd_req))
        connect(m, arbiter.mem_rd_data, flipped(self.mem_rd_data))
        connect(m, arbiter.mem_wr_req, flipped(self.mem_wr_req))
        connect(m, arbiter.mem_wr_data, flipped(self.mem_wr_data))
        if self.config.memory_system.write_response:
            connect(m, flipped(self.mem_wr_resp), arbiter.mem_wr_resp)
        return sram_writer

    @staticmethod
    def _queues(m: Module, fetch, units: dict, queues: dict):
        """Fetch's command queues into the modules, and the token queues between them."""
        for name, unit in units.items():
            connect(m, getattr(fetch, f"{name}_cmds"), unit.cmds)
        # A unit's token ports are named for the module at the queue's other end.
        for (producer, consumer), name in TOKEN_QUEUES.items():
            producer, consumer = MODULES[producer], MODULES[consumer]
            connect(m, getattr(units[producer], f"to_{consumer}"), queues[name].push)
            connect(m, queues[name].pop, getattr(units[consumer], f"from_{producer}"))

    def _shared_srams(self, m: Module, sram_writer, compute, store):
        """inp, wgt and out, each a block RAM with one read and one write port. out is
        banked like acc, row for row, so the two compute units write it at the same
        time (on different banks) while store reads it."""
        config = self.config
        srams = {}
        for kind in ("inp", "wgt"):
            srams[kind] = memory.Memory(shape=config.element_bytes(kind) * 8,
                                        depth=config.depth(kind), init=[],
                                        attrs=collision_attrs(config))
            m.submodules[f"{kind}_mem"] = srams[kind]
        connect(m, sram_writer.sram_inp, srams["inp"].write_port())
        connect(m, sram_writer.sram_wgt, srams["wgt"].write_port())
        connect(m, compute.inp_read, srams["inp"].read_port(transparent_for=()))
        connect(m, compute.wgt_read, srams["wgt"].read_port(transparent_for=()))
        m.submodules.out_mem = out_mem = BankedMemory(
            config.element_bytes("out") * 8, config.depth("out"), config.acc_banks,
            read_ports=1, write_ports=2, attrs=collision_attrs(config))
        connect(m, compute.out_write, out_mem.write[0])
        connect(m, compute.out_write_alu, out_mem.write[1])
        connect(m, store.out_read, out_mem.read[0])

    def _done(self, m: Module, go, fetch, load, compute, store):
        """``done`` once the program has drained (the port contract); returns ``running``,
        high from ``go`` to ``done``."""
        running = Signal()
        done = Signal()
        drained = (compute.finished & fetch.complete & load.idle & (fetch.load_level == 0)
                   & store.idle & (fetch.store_level == 0) & fetch.idle)
        if self.config.memory_system.write_response:   # every stored byte visible before done
            drained &= ~store.writes_pending
        with m.If(self.start):
            m.d.sync += [running.eq(0), done.eq(0)]
        with m.Elif(go):
            m.d.sync += running.eq(1)
        with m.Elif(running & drained):
            m.d.sync += [running.eq(0), done.eq(1)]
        m.d.comb += self.done.eq(done)
        return running

    def _activity(self, m: Module, units: dict, running) -> dict:
        """Each module's ``activity_<module>``: one state per cycle. Returns the events
        its counters count (the same states), and ``cycles``."""
        code = {state: index for index, state in enumerate(ACTIVITY_STATES)}
        assert code["busy"] & code["wait_mem"] & 1 and not code["wait_token"] & 1
        events = {"cycles": running}
        for name, unit in units.items():
            activity = getattr(self, f"activity_{name}")
            m.d.comb += activity.eq(Mux(unit.wait_mem, code["wait_mem"],
                                        Mux(unit.busy, code["busy"],
                                            Mux(unit.wait_token, code["wait_token"],
                                                code["idle"]))))
            events[f"{name}_busy"] = activity[0]  # busy or wait_mem: executing
            events[f"{name}_wait_token"] = activity == code["wait_token"]
            events[f"{name}_wait_mem"] = activity == code["wait_mem"]
        return events

    def _counters(self, m: Module, events: dict):
        """A ``counter_<name>`` per counter of the config, counting its event; cleared
        by ``start``."""
        assert set(events) == set(RTL_COUNTERS), set(RTL_COUNTERS) ^ set(events)
        for name in rtl_counters(self.config):
            counter = getattr(self, f"counter_{name}")
            count = Signal(32, name=f"count_{name}")
            m.d.comb += counter.eq(count)
            with m.If(self.start):
                m.d.sync += count.eq(0)
            with m.Elif(events[name]):
                m.d.sync += count.eq(count + 1)

    def _status(self, m: Module, fetch, queues: dict, units: dict):
        """The ``status_<name>`` outputs: queue occupancies, instructions fetched and
        retired."""
        status = {"fetched": fetch.fetched}
        status.update({f"tokens_{name}": queue.count for name, queue in queues.items()})
        for name, unit in units.items():
            status[f"cmds_{name}"] = getattr(fetch, f"{name}_level")
            status[f"retired_{name}"] = unit.retired
        assert set(status) == set(RTL_STATUS), set(RTL_STATUS) ^ set(status)
        for name in RTL_STATUS:
            m.d.comb += getattr(self, f"status_{name}").eq(status[name])
