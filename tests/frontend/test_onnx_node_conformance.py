"""onnx's own node test cases through vdla's importer and float reference
(`vdla.testing.onnx_node_cases`): no operator passes fewer cases than
docs/onnx_conformance.md says, the table is generated from the code, and the
harness tells a pass from a failure, a refusal and a crash.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.backend.test.case.test_case import TestCase

from vdla.frontend.onnx import supported_operators
from vdla.testing import onnx_node_cases
from vdla.testing.onnx_node_cases import (conformance, counts, markdown, node_cases,
                                          parse_markdown, run_case)

DOCS = Path(__file__).resolve().parents[2] / "docs" / "onnx_conformance.md"
REGENERATE = "python -m vdla.testing.onnx_node_cases --markdown docs/onnx_conformance.md"
# onnx computes these operators' expected outputs with its pure-Python reference pools
# as their cases are collected: seconds of CPU, so their check is in the slow test.
SLOW_TO_COLLECT = ("AveragePool", "MaxPool")


@functools.lru_cache(maxsize=None)
def _results(op: str) -> tuple:
    return tuple(conformance([op])[op])


def _documented() -> dict[str, dict[str, int]]:
    return parse_markdown(DOCS.read_text())


def _assert_no_regression(ops) -> None:
    documented = _documented()
    worse = []
    for op in ops:
        if op not in documented:
            continue   # a new operator: the stale-table test asks for it to be added
        now = counts(list(_results(op)))
        if now["pass"] < documented[op]["pass"] or now["exact"] < documented[op]["exact"]:
            failing = [f"{r.name} ({r.outcome}: {r.detail})" for r in _results(op)
                       if r.outcome != "pass"]
            worse.append(f"{op}: {now['pass']} pass ({now['exact']} exact), "
                         f"docs/onnx_conformance.md says {documented[op]['pass']} "
                         f"({documented[op]['exact']}); not passing: {'; '.join(failing) or 'none'}")
    assert not worse, "\n".join(worse)


def test_every_operator_vdla_imports_is_in_the_table():
    assert set(_documented()) == set(supported_operators()), \
        f"docs/onnx_conformance.md is stale: run `{REGENERATE}`"


def test_operators_pass_at_least_the_documented_cases():
    _assert_no_regression([op for op in supported_operators() if op not in SLOW_TO_COLLECT])


@pytest.mark.slow
def test_docs_onnx_conformance_md_is_generated_from_the_code():
    _assert_no_regression([op for op in supported_operators() if op in SLOW_TO_COLLECT])
    results = {op: list(_results(op)) for op in supported_operators()}
    assert DOCS.read_text() == markdown(results), \
        f"docs/onnx_conformance.md is stale: run `{REGENERATE}`"


def test_cases_are_onnxs_one_node_cases_of_the_operator():
    cases = node_cases("Relu")
    assert [case.name for case in cases] == ["test_relu"]
    (node,) = cases[0].model.graph.node
    assert node.op_type == "Relu" and cases[0].data_sets
    gemm = node_cases("Gemm")
    assert len(gemm) >= 10 and {c.model.graph.node[0].op_type for c in gemm} == {"Gemm"}


def _case(op: str, inputs: dict, expected: np.ndarray, opset: int = 17, **attrs) -> TestCase:
    node = helper.make_node(op, list(inputs), ["y"], **attrs)
    graph = helper.make_graph(
        [node], f"test_{op.lower()}",
        [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(value.dtype),
                                       value.shape) for name, value in inputs.items()],
        [helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(expected.dtype),
                                       expected.shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return TestCase(f"test_{op.lower()}", f"test_{op.lower()}", None, None, model,
                    [(list(inputs.values()), [expected])], "node", 1e-3, 1e-7)


def test_a_right_answer_passes_bit_for_bit_with_the_weight_as_a_constant():
    x = np.array([[1.0, -2.0], [3.0, 4.0]], np.float32)
    w = np.array([[0.5, 1.0], [2.0, -1.0]], np.float32)
    result = run_case("MatMul", _case("MatMul", {"x": x, "w": w}, x @ w))
    assert (result.outcome, result.exact, result.layout) == ("pass", True, "first input fed")


def test_wrong_values_shapes_and_dtypes_fail_with_the_reason():
    x = np.array([[-1.0, 2.0, -3.0]], np.float32)
    off = np.maximum(x, 0)
    off[0, 1] = 2.01
    assert run_case("Relu", _case("Relu", {"x": x}, off)).detail == \
        "output 'y': 1 of 3 values differ (largest by 0.01)"
    within = np.maximum(x, 0) * np.float32(1 + 1e-4)
    result = run_case("Relu", _case("Relu", {"x": x}, within))
    assert (result.outcome, result.exact) == ("pass", False)
    case = _case("Relu", {"x": x}, np.maximum(x, 0))
    case.data_sets = [([x], [np.maximum(x, 0).astype(np.float64)])]
    assert run_case("Relu", case).detail == "output 'y': dtype float32, expected float64"
    case.data_sets = [([x], [np.maximum(x, 0).reshape(3, 1)])]
    assert run_case("Relu", case).detail == "output 'y': shape (1, 3), expected (3, 1)"


def test_a_constant_node_is_judged_through_an_add_of_fed_zeros():
    value = np.arange(6, dtype=np.float32).reshape(2, 3)
    case = _case("Constant", {}, value, value=onnx.numpy_helper.from_array(value))
    result = run_case("Constant", case)
    assert (result.outcome, result.layout) == ("pass", "all constant")
    case.data_sets = [([], [value + 1])]
    assert run_case("Constant", case).outcome == "fail"


def test_an_unsupported_case_is_refused_with_vdlas_message():
    x = np.ones((1, 2, 3, 3), np.float32)
    result = run_case("Einsum", _case("Einsum", {"x": x}, x, equation="nchw->nchw"))
    assert result.outcome == "refused" and result.layout is None
    assert result.detail.startswith("node 'y' (Einsum): operator Einsum is not supported")
    newer = run_case("Relu", _case("Relu", {"x": x}, x, opset=8))
    assert newer.detail == "test_relu: opset 8 is not supported (vdla reads opsets 9-21)"


def test_anything_else_raised_is_an_error_not_a_refusal(monkeypatch):
    def broken(graph, feeds):
        raise IndexError("tuple index out of range")
    monkeypatch.setattr("vdla.graph.kernels.execute", broken)
    x = np.ones((2, 2), np.float32)
    result = run_case("Relu", _case("Relu", {"x": x}, x))
    assert (result.outcome, result.detail) == ("error", "IndexError: tuple index out of range")


def test_cases_at_a_newer_opset_are_converted_down_by_onnx():
    x = np.array([[-1.0, 2.0]], np.float32)
    result = run_case("Relu", _case("Relu", {"x": x}, np.maximum(x, 0), opset=24))
    assert result.outcome == "pass"


def test_the_table_round_trips(tmp_path):
    x = np.ones((2, 2), np.float32)
    results = {"Relu": [run_case("Relu", _case("Relu", {"x": x}, x)),
                        run_case("Relu", _case("Relu", {"x": x}, x + 1))]}
    text = markdown(results)
    assert parse_markdown(text) == {"Relu": {"cases": 2, "pass": 1, "exact": 1, "fail": 1,
                                             "refused": 0, "error": 0}}
    assert "- `test_relu` (fail): output 'y': 4 of 4 values differ (largest by 1)" in text
    out = tmp_path / "table.md"
    assert onnx_node_cases.main(["--ops", "Relu", "--markdown", str(out)]) == 0
    assert parse_markdown(out.read_text())["Relu"]["pass"] == 1
