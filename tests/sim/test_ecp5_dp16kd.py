"""vdla's behavioural ECP5 ``DP16KD`` (sim/ecp5_dp16kd.v), checked two ways.

1. Against Amaranth: a small memory's RTL against the netlist ``synth_ecp5`` maps it to
   (block RAM in each data width and write mode Yosys uses), in `sim.gate.check_block`'s
   miter, every input random every cycle.
2. Against a second, plainly written reference (`REFERENCE`: the RAM as 18,432 bits, a word's
   first bit from the documented address map) for what Yosys never uses: output registers,
   chip selects, sync and async reset, NORMAL writes, x1 / x2 ports, mixed widths, initial
   contents, and two ports at one address.
"""

from __future__ import annotations

import re

import pytest
from amaranth import Module
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from vdla.hw.synth import block_netlist, block_verilog
from vdla.sim.gate import GateError, cell_models, check_block

pytestmark = pytest.mark.rtl


class Rams(wiring.Component):
    """Memories side by side, on shared random inputs: each ``(width, depth, granularity,
    transparent, shared)`` has one write port and one synchronous read port, whose address is
    the write's when ``shared`` (Yosys then maps both to one DP16KD port with a WRITEMODE)."""

    def __init__(self, shapes):
        self.shapes = shapes
        bits = max((depth - 1).bit_length() for _, depth, *_ in shapes)
        super().__init__({"wa": In(bits), "ra": In(bits), "wd": In(36), "we": In(4),
                          "re": In(1),
                          **{f"rd{i}": Out(shape[0]) for i, shape in enumerate(shapes)}})

    def elaborate(self, platform):
        m = Module()
        for i, (width, depth, granularity, transparent, shared) in enumerate(self.shapes):
            mem = memory.Memory(shape=width, depth=depth, init=[])
            m.submodules[f"mem{i}"] = mem
            write = mem.write_port(granularity=granularity)
            read = mem.read_port(transparent_for=(write,) if transparent else ())
            m.d.comb += [write.addr.eq(self.wa), write.data.eq(self.wd), write.en.eq(self.we),
                         read.addr.eq(self.wa if shared else self.ra), read.en.eq(self.re),
                         getattr(self, f"rd{i}").eq(read.data)]
        return m


# (width, depth, granularity, transparent, shared), and what its DP16KD sets.
SHAPES = {
    (36, 512, None, False, False): ("DATA_WIDTH_A(32'd36)",),               # PDPW16KD, as vdla's
    (18, 1024, 9, False, False): ("DATA_WIDTH_A(32'd18)", 'WRITEMODE_B("READBEFOREWRITE")'),
    (9, 2048, None, False, False): ("DATA_WIDTH_A(32'd9)",),
    (4, 4096, None, False, False): ("DATA_WIDTH_A(32'd4)",),
    (18, 1024, 9, True, True): ('WRITEMODE_A("WRITETHROUGH")',),           # transparent, one port
    (18, 1024, None, False, True): ('DATA_WIDTH_A(32\'d18)', 'WRITEMODE_A("READBEFOREWRITE")'),
}


def _instances(netlist: str) -> list[str]:
    return re.findall(r"DP16KD #\((.*?)\) \\", netlist, re.DOTALL)


def test_block_ram_netlists_equal_their_amaranth_memories():
    shapes = list(SHAPES)
    gate = block_netlist(Rams(shapes), "rams_gate", "ecp5")
    instances = _instances(gate)
    assert len(instances) == len(shapes)
    for expected in SHAPES.values():   # each configuration is in the netlist
        assert any(all(f".{text}" in instance for text in expected) for instance in instances)
    result = check_block(block_verilog(Rams(shapes), "rams_rtl"), "rams_rtl", gate, "rams_gate",
                         "ecp5", cycles=50_000)
    assert result.cycles == 50_000
    assert result.equal, result.first_mismatch


def test_the_miter_sees_a_read_port_of_other_transparency():
    """Read-during-write goes through the model: a transparent memory's netlist is not a
    non-transparent memory's RTL."""
    gate = block_netlist(Rams([(18, 1024, 9, True, True)]), "ram_gate", "ecp5")
    result = check_block(block_verilog(Rams([(18, 1024, 9, False, True)]), "ram_rtl"),
                         "ram_rtl", gate, "ram_gate", "ecp5", cycles=30_000)
    assert result.mismatches > 1_000


REFERENCE = r"""
module ref_dp16kd #(parameter integer WA = 18, WB = 18, parameter RA = "NOREG", RB = "NOREG",
    RESETMODE = "SYNC", WMA = "NORMAL", WMB = "NORMAL", parameter [2:0] CSA = 0, CSB = 0,
    parameter [20479:0] INIT = 0)
  (input clk, input [17:0] dia, dib, input [13:0] ada, adb,
   input cea, ceb, ocea, oceb, wea, web, rsta, rstb, input [2:0] csa, csb,
   output [17:0] doa, dob);
  localparam WIDE = WA == 36;
  reg bits [0:18431];
  integer i, k;
  initial for (i = 0; i < 18432; i = i + 1) bits[i] = INIT[(i / 18) * 20 + i % 18];
  // The documented address map: a word's first bit in the 18,432.
  function integer first(input integer w, input [13:0] ad);
    case (w)
      36: first = 36 * ad[13:5];
      18: first = 18 * ad[13:4];
      9: first = 9 * ad[13:3];
      4: first = 9 * ad[13:3] + 4 * ad[2];
      2: first = 9 * ad[13:3] + 2 * ad[2:1];
      default: first = 9 * ad[13:3] + ad[2:0];
    endcase
  endfunction
  function writes_bit(input integer w, input [13:0] ad, input integer k);  // byte enables
    writes_bit = w >= 18 ? ad[k / 9] : 1'b1;
  endfunction
  wire on_a = cea && csa == CSA, on_b = ceb && csb == CSB;
  wire we_a = on_a && wea, we_b = on_b && web && !WIDE;
  wire [35:0] in_a = WIDE ? {dib, dia} : dia, in_b = dib;
  wire integer fa = first(WA, ada), fb = first(WB, adb);
  // Does a port write bit i of the 18,432 at this edge?
  function hit(input we, input integer w, input [13:0] ad, input integer f, input integer i);
    hit = we && i >= f && i < f + w && writes_bit(w, ad, i - f);
  endfunction
  reg [35:0] next_a, next_b;
  always @* begin
    next_a = 0; next_b = 0;
    for (k = 0; k < WA; k = k + 1)
      next_a[k] = (WMA == "WRITETHROUGH" && hit(we_a, WA, ada, fa, fa + k) ? in_a[k]
                   : bits[fa + k]) ^ hit(we_b, WB, adb, fb, fa + k);
    for (k = 0; k < WB; k = k + 1)
      next_b[k] = (WMB == "WRITETHROUGH" && hit(we_b, WB, adb, fb, fb + k) ? in_b[k]
                   : bits[fb + k]) ^ hit(we_a, WA, ada, fa, fb + k);
  end
  integer j;
  always @(posedge clk) begin
    for (j = 0; j < WA; j = j + 1)
      if (hit(we_a, WA, ada, fa, fa + j)) bits[fa + j] <= in_a[j] ^ hit(we_b, WB, adb, fb, fa + j);
    for (j = 0; j < WB; j = j + 1)
      if (hit(we_b, WB, adb, fb, fb + j) && !hit(we_a, WA, ada, fa, fb + j)) bits[fb + j] <= in_b[j];
  end
  wire load_a = on_a && !WIDE && !(we_a && WMA == "NORMAL");
  wire load_b = on_b && !(we_b && WMB == "NORMAL");
  reg [35:0] q_a = 0, q_b = 0, r_a = 0, r_b = 0;
  wire async_a = RESETMODE == "ASYNC" && rsta, async_b = RESETMODE == "ASYNC" && rstb;
  always @(posedge clk or posedge async_a)
    if (rsta) begin q_a <= 0; r_a <= 0; end
    else begin if (load_a) q_a <= next_a; if (ocea) r_a <= q_a; end
  always @(posedge clk or posedge async_b)
    if (rstb) begin q_b <= 0; r_b <= 0; end
    else begin if (load_b) q_b <= next_b; if (oceb) r_b <= q_b; end
  wire [35:0] show_a = RA == "OUTREG" ? r_a : q_a, show_b = RB == "OUTREG" ? r_b : q_b;
  assign doa = WIDE ? show_b[17:0] : show_a[17:0];
  assign dob = WIDE ? show_b[35:18] : show_b[17:0];
endmodule
"""

CONFIGURATIONS = (
    # x18 writethrough / x9 behind an output register; sync reset, chip selects
    dict(DATA_WIDTH_A=18, DATA_WIDTH_B=9, WRITEMODE_A="WRITETHROUGH", WRITEMODE_B="READBEFOREWRITE",
         REGMODE_A="NOREG", REGMODE_B="OUTREG", RESETMODE="SYNC", CSDECODE_A="010",
         CSDECODE_B="101"),
    # x4 NORMAL behind an output register / x1 writethrough; async reset
    dict(DATA_WIDTH_A=4, DATA_WIDTH_B=1, WRITEMODE_A="NORMAL", WRITEMODE_B="WRITETHROUGH",
         REGMODE_A="OUTREG", REGMODE_B="NOREG", RESETMODE="ASYNC", CSDECODE_A="000",
         CSDECODE_B="111"),
    # x2 / x18 NORMAL
    dict(DATA_WIDTH_A=2, DATA_WIDTH_B=18, WRITEMODE_A="READBEFOREWRITE", WRITEMODE_B="NORMAL",
         REGMODE_A="NOREG", REGMODE_B="NOREG", RESETMODE="SYNC", CSDECODE_A="110",
         CSDECODE_B="011"),
    # x36 behind an output register; async reset
    dict(DATA_WIDTH_A=36, DATA_WIDTH_B=36, WRITEMODE_A="NORMAL", WRITEMODE_B="NORMAL",
         REGMODE_A="NOREG", REGMODE_B="OUTREG", RESETMODE="ASYNC", CSDECODE_A="001",
         CSDECODE_B="100"),
)
# Initial contents in the rows the tests' 7-bit addresses reach (rows 0-7), and one beyond.
INIT = {row: (0x2_5A5A + 0x1_1111 * row) & 0x3FFFF for row in range(8)} | {900: 0x3FFFF}


def _pins(port: str, name: str, width: int) -> str:
    return ", ".join(f".{port}{i}({name}[{i}])" for i in range(width))


def _tops(configurations, init_rows: dict[int, int]) -> tuple[str, str]:
    """(reference top ``ref_top``, netlist-style top ``gate_top`` with DP16KD instances): one
    RAM per configuration, on shared random inputs. ``rst`` (one cycle in 16) resets port A,
    and port B when ``rb`` too; ``sa``/``sb``'s top bit selects a port (its CSDECODE), else
    CS is random. Addresses are 7 bits, so that the ports meet often."""
    rows = [init_rows.get(row, 0) for row in range(1024)]
    init = "".join(f"{rows[r]:05x}" for r in reversed(range(1024)))  # 20 bits a row
    initvals = {f"INITVAL_{block:02X}": "320'h" + "".join(
        f"{rows[block * 16 + r]:05x}" for r in reversed(range(16))) for block in range(64)}
    outputs = ", ".join(f"output [17:0] doa{i}, dob{i}" for i in range(len(configurations)))
    header = (f"(input clk, input rst, input rb, input [17:0] dia, dib, input [6:0] ada, adb, "
              f"input cea, ceb, ocea, oceb, wea, web, input [3:0] sa, sb, {outputs});\n"
              "  wire [13:0] a = {7'd0, ada}, b = {7'd0, adb};\n")
    reference, gate = "module ref_top" + header, "module gate_top" + header
    for i, p in enumerate(configurations):
        selects = (f"  wire [2:0] csa{i} = sa[3] ? 3'b{p['CSDECODE_A']} : sa[2:0];\n"
                   f"  wire [2:0] csb{i} = sb[3] ? 3'b{p['CSDECODE_B']} : sb[2:0];\n")
        reference += selects + (
            f"  ref_dp16kd #(.WA({p['DATA_WIDTH_A']}), .WB({p['DATA_WIDTH_B']}), "
            f".RA(\"{p['REGMODE_A']}\"), .RB(\"{p['REGMODE_B']}\"), "
            f".RESETMODE(\"{p['RESETMODE']}\"), .WMA(\"{p['WRITEMODE_A']}\"), "
            f".WMB(\"{p['WRITEMODE_B']}\"), .CSA(3'b{p['CSDECODE_A']}), "
            f".CSB(3'b{p['CSDECODE_B']}), .INIT(20480'h{init})) ram{i} (.clk(clk), .dia(dia), "
            ".dib(dib), .ada(a), .adb(b), .cea(cea), .ceb(ceb), .ocea(ocea), .oceb(oceb), "
            f".wea(wea), .web(web), .rsta(rst), .rstb(rst & rb), .csa(csa{i}), .csb(csb{i}), "
            f".doa(doa{i}), .dob(dob{i}));\n")
        values = {key: (f"32'd{value}" if key.startswith("DATA_WIDTH") else
                        f'"0b{value}"' if key.startswith("CSDECODE") else f'"{value}"')
                  for key, value in p.items()} | initvals
        gate += selects + (
            "  DP16KD #(\n" + ",\n".join(f"    .{key}({value})" for key, value in values.items())
            + f") ram{i} (.CLKA(clk), .CLKB(clk), .RSTA(rst), .RSTB(rst & rb), .CEA(cea), "
            ".CEB(ceb), .OCEA(ocea), .OCEB(oceb), .WEA(wea), .WEB(web), "
            + ", ".join([_pins("DIA", "dia", 18), _pins("DIB", "dib", 18), _pins("ADA", "a", 14),
                         _pins("ADB", "b", 14), _pins("CSA", f"csa{i}", 3),
                         _pins("CSB", f"csb{i}", 3), _pins("DOA", f"doa{i}", 18),
                         _pins("DOB", f"dob{i}", 18)]) + ");\n")
    return REFERENCE + reference + "endmodule\n", gate + "endmodule\n"


def test_the_model_equals_the_reference_in_every_mode():
    reference, gate = _tops(CONFIGURATIONS, INIT)
    result = check_block(reference, "ref_top", gate, "gate_top", "ecp5", cycles=200_000)
    assert result.equal, result.first_mismatch


def test_the_reference_check_sees_a_wrong_address_map():
    """The same check fails when the netlist's x9 port reads another byte."""
    reference, gate = _tops(CONFIGURATIONS[:1], INIT)
    gate = gate.replace(".ADB3(b[3])", ".ADB3(~b[3])")
    assert check_block(reference, "ref_top", gate, "gate_top", "ecp5", cycles=20_000).mismatches


@pytest.mark.parametrize("parameter, text", [
    ('.CEAMUX("INV")', 'has CEAMUX="INV"'),
    ('.DATA_WIDTH_A(32\'d36)', "has one port 36 bits wide and the other not"),
    ('.WRITEMODE_B("SOMETIMES")', 'has WRITEMODE_B="SOMETIMES"'),
    ('.CSDECODE_A("0b0x1")', 'has CSDECODE_A="0b0x1"'),
])
def test_configurations_the_model_does_not_simulate_are_refused(parameter, text):
    netlist = (f"module top(clk, a, y);\n  input clk, a;\n  output y;\n"
               f"  DP16KD #(\n    {parameter},\n"
               "    .DATA_WIDTH_B(32'd18)\n  ) \\mem.0.0  (\n    .CLKA(clk),\n    .CLKB(clk),\n"
               "    .ADA0(a),\n    .DOA0(y)\n  );\nendmodule\n")
    with pytest.raises(GateError, match=f"^the DP16KD mem.0.0 {re.escape(text)}: vdla's model "
                                        r"of DP16KD \(sim/ecp5_dp16kd.v\) does not simulate that$"):
        cell_models("ecp5", netlist)


def test_two_clocks_are_refused_and_an_unused_ports_is_not():
    netlist = ("module top(c0, c1, a, y);\n  input c0, c1, a;\n  output y;\n  DP16KD ram (\n"
               "    .CLKA(c0),\n    .CLKB({clock}),\n    .ADA0(a),\n    .DOA0(y)\n  );\n"
               "endmodule\n")
    assert "vdla_dp16kd" in cell_models("ecp5", netlist.format(clock="1'h0"))
    with pytest.raises(GateError, match="^the DP16KD ram has a clock on each port: "):
        cell_models("ecp5", netlist.format(clock="c1"))
