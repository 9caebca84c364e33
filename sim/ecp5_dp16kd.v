// vdla: a behavioural model of the Lattice ECP5 DP16KD block RAM, for gate-level simulation.
//
// Yosys's ecp5/cells_sim.v declares DP16KD's ports and parameters and nothing else; sim/gate.py
// wraps this module in that declaration (one pin per port there, buses here). Written from
// Lattice's documented behaviour (FPGA-TN-02204, ECP5 Memory Usage Guide) and the contract
// Yosys's mapper assumes of it (lattice/brams_16kd.txt, lattice/brams_map_16kd.v):
//
// - 1,024 rows of 18 bits (two 9-bit bytes), initialised from INITVAL_00..3F (row r is bits
//   [20r+17:20r] of {INITVAL_3F, ..., INITVAL_00}).
// - Each port is x1, x2, x4, x9 or x18 (DATA_WIDTH_A/B) over a 14-bit address: x18 takes row
//   AD[13:4] and AD[1:0] are its byte write enables; x9 is byte AD[3] of row AD[13:4]; x4, x2,
//   x1 are the data bits [7:0] of that byte (not the ninth), from AD[2:0]. x36 (both widths 36:
//   the pseudo-dual-port PDPW16KD configuration) writes through port A (DIA low half, DIB high,
//   byte enables ADA[3:0]) and reads through port B (DOA low, DOB high) rows {2w+1, 2w},
//   w = AD[13:5], with port B's CE, OCE and RST.
// - A port is enabled on a rising clock edge when CE is high and CS[2:0] equals CSDECODE. An
//   enabled port with WE high writes; WRITEMODE says what its output latch then shows: NORMAL
//   keeps it, WRITETHROUGH the data written, READBEFOREWRITE the old data. Without WE it reads.
// - REGMODE OUTREG adds an output register, loaded from the latch when OCE is high.
// - RST clears the latch and the output register (not the memory): at once with RESETMODE
//   ASYNC, at the next rising edge (whatever CE) with SYNC. Both start at zero.
// - Undefined in the hardware, and here a value no design may rely on: where the other port
//   writes at the same edge, a port's latch takes the complement of what it would otherwise
//   take; bits both ports write at once become the complement of port A's data.
//
// One clock: both ports run on `clk`, CLKA | CLKB (sim/gate.py refuses a DP16KD whose ports
// have different clocks, other than an unused port's constant 0, or an inverted pin).
// ASYNC_RESET_RELEASE and GSR do not change the simulation.
module vdla_dp16kd #(
    parameter integer WIDTH_A = 18,
    parameter integer WIDTH_B = 18,
    parameter REGMODE_A = "NOREG",
    parameter REGMODE_B = "NOREG",
    parameter RESETMODE = "SYNC",
    parameter [2:0] CSDECODE_A = 3'b000,
    parameter [2:0] CSDECODE_B = 3'b000,
    parameter WRITEMODE_A = "NORMAL",
    parameter WRITEMODE_B = "NORMAL",
    parameter [20479:0] INIT = 20480'b0
) (
    input clk,
    input [17:0] dia, dib,
    input [13:0] ada, adb,
    input cea, ceb, ocea, oceb, wea, web, rsta, rstb,
    input [2:0] csa, csb,
    output [17:0] doa, dob
);
    localparam WIDE = WIDTH_A == 36;   // the PDPW16KD configuration: A writes, B reads 36 bits

    reg [17:0] mem [0:1023];
    integer row;
    initial for (row = 0; row < 1024; row = row + 1) mem[row] = INIT[row * 20 +: 18];

    // Where a port's word lies in the 36 bits of rows {2w+1, 2w}, w = AD[13:5].
    function [5:0] shift_of(input integer width, input [13:0] ad);
        if (width >= 18)
            shift_of = width == 36 ? 6'd0 : 6'd18 * ad[4];
        else
            shift_of = 6'd18 * ad[4] + 6'd9 * ad[3] + (width == 9 ? 6'd0 : {3'd0, ad[2:0] & ~(width[2:0] - 3'd1)});
    endfunction
    function [35:0] bits_of(input integer width);
        bits_of = width == 36 ? {36{1'b1}} : (36'd1 << (width == 18 ? 18 : width)) - 36'd1;
    endfunction
    // The bits a write changes: x36 and x18 by byte enable, narrower widths their word.
    function [35:0] write_mask(input integer width, input [13:0] ad);
        if (width == 36)
            write_mask = {{9{ad[3]}}, {9{ad[2]}}, {9{ad[1]}}, {9{ad[0]}}};
        else if (width == 18)
            write_mask = {18'd0, {9{ad[1]}}, {9{ad[0]}}} << shift_of(width, ad);
        else
            write_mask = bits_of(width) << shift_of(width, ad);
    endfunction

    wire [8:0] pair_a = ada[13:5], pair_b = adb[13:5];
    wire [35:0] old_a = {mem[{pair_a, 1'b1}], mem[{pair_a, 1'b0}]};
    wire [35:0] old_b = {mem[{pair_b, 1'b1}], mem[{pair_b, 1'b0}]};
    wire [5:0] shift_a = shift_of(WIDTH_A, ada), shift_b = shift_of(WIDTH_B, adb);
    wire on_a = cea & (csa == CSDECODE_A), on_b = ceb & (csb == CSDECODE_B);
    wire write_a = on_a & wea, write_b = on_b & web & !WIDE;
    wire [35:0] mask_a = write_a ? write_mask(WIDTH_A, ada) : 36'd0;
    wire [35:0] mask_b = write_b ? write_mask(WIDTH_B, adb) : 36'd0;
    wire [35:0] data_a = (WIDE ? {dib, dia} : {18'd0, dia}) << shift_a;
    wire [35:0] data_b = {18'd0, dib} << shift_b;
    // Each port's write as if the other did nothing; where both write the same bits at once
    // (undefined in the hardware), the memory takes the complement of port A's data.
    wire same = pair_a == pair_b;
    wire [35:0] both = same ? mask_a & mask_b : 36'd0;
    wire [35:0] written_a = (old_a & ~mask_a) | (data_a & mask_a);
    wire [35:0] written_b = (old_b & ~mask_b) | (data_b & mask_b);
    wire [35:0] stored_b = same ? (written_a & ~mask_b) | (data_b & mask_b & ~both) | (~data_a & both)
                                : written_b;

    always @(posedge clk) begin
        if (write_a) {mem[{pair_a, 1'b1}], mem[{pair_a, 1'b0}]} <= written_a;
        if (write_b) {mem[{pair_b, 1'b1}], mem[{pair_b, 1'b0}]} <= stored_b;   // after A's
    end

    // What a port's latch takes at this edge: the word read, or the word written (WRITETHROUGH);
    // complemented where the other port writes.
    function [35:0] latched(input integer width, input [35:0] word, input [5:0] shift,
                            input [35:0] other_mask);
        latched = ((word ^ (other_mask & (bits_of(width) << shift))) >> shift) & bits_of(width);
    endfunction
    wire [35:0] take_a = latched(WIDTH_A, write_a && WRITEMODE_A == "WRITETHROUGH" ? written_a
                                          : old_a, shift_a, same ? mask_b : 36'd0);
    wire [35:0] take_b = latched(WIDTH_B, write_b && WRITEMODE_B == "WRITETHROUGH" ? written_b
                                          : old_b, shift_b, same ? mask_a : 36'd0);
    // NORMAL: a write leaves the latch as it was.
    wire load_a = on_a & !WIDE & !(write_a && WRITEMODE_A == "NORMAL");
    wire load_b = on_b & !(write_b && WRITEMODE_B == "NORMAL");

    reg [35:0] latch_a = 36'd0, latch_b = 36'd0, out_a = 36'd0, out_b = 36'd0;
    generate if (RESETMODE == "ASYNC") begin : async_reset
        always @(posedge clk or posedge rsta)
            if (rsta) begin latch_a <= 36'd0; out_a <= 36'd0; end
            else begin if (load_a) latch_a <= take_a; if (ocea) out_a <= latch_a; end
        always @(posedge clk or posedge rstb)
            if (rstb) begin latch_b <= 36'd0; out_b <= 36'd0; end
            else begin if (load_b) latch_b <= take_b; if (oceb) out_b <= latch_b; end
    end else begin : sync_reset
        always @(posedge clk)
            if (rsta) begin latch_a <= 36'd0; out_a <= 36'd0; end
            else begin if (load_a) latch_a <= take_a; if (ocea) out_a <= latch_a; end
        always @(posedge clk)
            if (rstb) begin latch_b <= 36'd0; out_b <= 36'd0; end
            else begin if (load_b) latch_b <= take_b; if (oceb) out_b <= latch_b; end
    end endgenerate

    wire [35:0] shown_a = REGMODE_A == "OUTREG" ? out_a : latch_a;
    wire [35:0] shown_b = REGMODE_B == "OUTREG" ? out_b : latch_b;
    assign doa = WIDE ? shown_b[17:0] : shown_a[17:0];
    assign dob = WIDE ? shown_b[35:18] : shown_b[17:0];
endmodule
