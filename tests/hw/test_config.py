"""HwConfig: presets, derived sizes, JSON round trip, refusal of impossible configs."""

import json

import pytest

from vdla.hw.config import ELEMENT_KINDS, PRESETS, SRAM_KINDS, ConfigError, HwConfig, load_config


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_round_trips_through_json(name):
    config = PRESETS[name]
    assert HwConfig.from_json(config.to_json()) == config


def test_default_matches_vta_buffers():
    config = PRESETS["default"]
    # VTA: 1x16x16 GEMM, uop 32 KiB, inp 32 KiB, wgt 256 KiB, acc 128 KiB.
    assert (config.batch, config.block_in, config.block_out) == (1, 16, 16)
    assert {k: config.depth(k) for k in ELEMENT_KINDS} == \
        {"uop": 8192, "inp": 2048, "wgt": 1024, "acc": 2048, "out": 2048}
    assert config.macs_per_cycle == 256
    assert config.out_buffer_bytes == 32 * 1024
    assert config.element_bytes("acc") == 64 and config.beats("wgt") == 32


@pytest.mark.parametrize("changes, field", [
    ({"block_in": 12}, "block_in"),
    ({"batch": 0}, "batch"),
    ({"inp_buffer_bytes": 3000}, "inp_buffer_bytes"),
    ({"acc_width": 16}, "acc_width"),
    ({"dram_bus_bits": 4}, "dram_bus_bits"),
    ({"block_out": "16"}, "block_out"),
    ({"wgt_buffer_bytes": 128}, "wgt_buffer_bytes"),
    ({"acc_buffer_bytes": 1 << 24}, "acc_buffer_bytes"),
    ({"max_acc_banks": 3}, "max_acc_banks: must be a power of two, got 3"),
    ({"fetch_buffer_depth": 0}, "fetch_buffer_depth: must be positive, got 0"),
    ({"cmd_queue_depth": 3}, "cmd_queue_depth: must be a power of two, got 3"),
    ({"dram_addr_bits": 33}, r"dram_addr_bits: must be 12\.\.32, got 33"),
    ({"dram_addr_bits": 11}, r"dram_addr_bits: must be 12\.\.32, got 11"),
    ({"event_counters": 2}, r"event_counters: must be 0 \(only cycles\) or 1 \(all\), got 2"),
    ({"event_counters": -1}, r"event_counters: must be 0 \(only cycles\) or 1 \(all\), got -1"),
    ({"event_counters": True}, "event_counters: expected an integer, got True"),
    ({"shared_load_engine": 2}, "shared_load_engine: must be 0 or 1, got 2"),
    ({"narrow_walkers": -1}, "narrow_walkers: must be 0 or 1, got -1"),
    ({"ram_collision_dont_care": 3}, "ram_collision_dont_care: must be 0 or 1, got 3"),
    ({"sequencer_gap": 2}, "sequencer_gap: must be 0 or 1, got 2"),
    ({"registered_load_walk": 2}, "registered_load_walk: must be 0 or 1, got 2"),
    ({"registered_control": 2}, "registered_control: must be 0 or 1, got 2"),
    ({"registered_load_data": 2}, "registered_load_data: must be 0 or 1, got 2"),
    ({"registered_load_data": 1}, "registered_load_data: needs registered_load_walk"),
    ({"gemm_operand_copies": 0}, "gemm_operand_copies: must be positive, got 0"),
    ({"gemm_operand_copies": 3, "gemm_operand_stage": 1},
     "gemm_operand_copies: must divide block_out 16, got 3"),
    ({"gemm_operand_copies": 2}, "gemm_operand_copies: copies of the registered operand need "
     "gemm_operand_stage"),
    # Valid shapes Amaranth cannot elaborate (an AssertionError inside it, before).
    ({"block_in": 128, "block_out": 128},
     r"block_out x block_in: one wgt SRAM entry \(128x128 x 8 bits\) is 131,072 bits wide, "
     r"more than the 65,535 bits Amaranth allows in one signal"),
    ({"block_in": 128, "block_out": 64}, r"one wgt SRAM entry \(64x128 x 8 bits\) is 65,536"),
    ({"batch": 64, "block_in": 4, "block_out": 32},
     r"batch x block_out: one acc SRAM entry \(64x32 x 32 bits\) is 65,536 bits wide"),
    ({"registered_dispatch": 1, "cmd_queue_depth": 0, "fetch_buffer_depth": 1,
      "dram_bus_bits": 128},
     r"registered_dispatch: needs a bus of 10 to 64 bits .* got dram_bus_bits 128"),
    ({"registered_dispatch": 1, "cmd_queue_depth": 0, "fetch_buffer_depth": 1,
      "dram_bus_bits": 8},
     r"registered_dispatch: needs a bus of 10 to 64 bits .* got dram_bus_bits 8"),
])
def test_impossible_config_names_the_field(changes, field):
    with pytest.raises(ConfigError, match=field):
        PRESETS["default"].replace(**changes)


def test_index_bits_overflowing_the_uop_word_is_refused():
    with pytest.raises(ConfigError, match="acc/inp/wgt_buffer_bytes: a micro-op"):
        HwConfig(inp_buffer_bytes=1 << 20, acc_buffer_bytes=1 << 22, wgt_buffer_bytes=1 << 22)


def test_unknown_field_and_bad_json_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="unknown config field"):
        HwConfig.from_dict({"blok_in": 16})
    with pytest.raises(ConfigError, match="not valid JSON"):
        HwConfig.from_json("{")
    path = tmp_path / "c.json"
    path.write_text(json.dumps({**PRESETS["tiny"].to_dict(), "dram_read_latency": 3}))
    assert load_config(path).dram_read_latency == 3
    with pytest.raises(ConfigError, match="no such preset"):
        load_config(tmp_path / "missing.json")


def test_hash_ignores_the_name_only():
    config = PRESETS["tiny"]
    assert config.replace(name="x").hash == config.hash
    assert config.replace(dram_read_latency=9).hash != config.hash


def test_fields_added_later_keep_old_hashes_at_their_defaults():
    """Baselines and program files recorded before a field existed still match."""
    config = PRESETS["tiny"]
    assert config.hash == "c373b04d80059c2a"   # bench/baselines/tiny.json's config_hash
    for changes in ({"max_acc_banks": 2}, {"fetch_buffer_depth": 8}, {"dram_addr_bits": 20},
                    {"cmd_queue_depth": 0}, {"event_counters": 0}, {"shared_load_engine": 1},
                    {"narrow_walkers": 1}, {"ram_collision_dont_care": 1},
                    {"sequencer_gap": 1}, {"two_cycle_alu": 1}, {"gemm_operand_stage": 1},
                    {"registered_load_walk": 1},
                    {"registered_dispatch": 1}, {"registered_control": 1},
                    {"gemm_tree_stage": 1}):
        assert config.replace(**changes).hash != config.hash
    walk = config.replace(registered_load_walk=1)   # registered_load_data needs it
    assert walk.replace(registered_load_data=1).hash != walk.hash


def test_walker_bits_count_the_deepest_sram_only_when_narrow():
    from vdla.hw import isa
    config = PRESETS["tiny"]            # uop: 2048 / 4 = 512 entries, the deepest
    assert config.walker_bits == isa.SIZE_BITS + 2
    assert config.replace(narrow_walkers=1).walker_bits == 10
    assert PRESETS["icebreaker"].walker_bits == 9    # uop, wgt, acc: 256 entries each


@pytest.mark.parametrize("dram_addr_bits, count_bits", [(32, 32), (31, 28), (17, 14), (12, 9)])
def test_instruction_counts_cover_every_instruction_the_dram_holds(dram_addr_bits, count_bits):
    config = PRESETS["tiny"].replace(dram_addr_bits=dram_addr_bits)
    assert config.insn_count_bits == count_bits
    if dram_addr_bits < 32:   # the most instructions reachable DRAM holds fits, unsigned
        most = (1 << dram_addr_bits) // (HwConfig.INSN_BITS // 8)
        assert most.bit_length() == count_bits


def test_counters_follow_the_config():
    from vdla.hw.counters import RTL_COUNTERS, rtl_counters
    assert rtl_counters(PRESETS["tiny"]) == RTL_COUNTERS
    assert rtl_counters(PRESETS["tiny"].replace(event_counters=0)) == ("cycles",)
    assert rtl_counters(PRESETS["icebreaker"]) == ("cycles",)


@pytest.mark.parametrize("max_acc_banks, acc_buffer_bytes, banks", [
    (1, 4096, 1), (2, 4096, 2), (4, 4096, 4), (64, 4096, 64),   # 256 rows
    (4, 64, 2), (4, 32, 1),                                      # 4 rows, 2 rows
])
def test_acc_banks_follow_the_field_and_the_buffer(max_acc_banks, acc_buffer_bytes, banks):
    config = PRESETS["tiny"].replace(max_acc_banks=max_acc_banks,
                                     acc_buffer_bytes=acc_buffer_bytes)
    assert config.acc_banks == banks
    assert config.acc_bank_rows * banks == config.depth("acc")


def test_memory_kinds_are_the_isa_memory_types():
    from vdla.hw.isa import MemType
    assert sorted(kind.kind for kind in MemType) == sorted(ELEMENT_KINDS)
    assert all(hasattr(PRESETS["default"], f"{kind}_buffer_bytes") for kind in SRAM_KINDS)
