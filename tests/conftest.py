"""Skip tests marked ``gpu`` where no CUDA device can be used, saying why."""

import pytest


@pytest.fixture(autouse=True)
def _skip_without_gpu(request):
    if request.node.get_closest_marker("gpu") is not None:
        from vdla.compiler.gpu.kernel import gpu_unavailable_reason
        reason = gpu_unavailable_reason()
        if reason is not None:
            pytest.skip(f"gpu test: {reason}")
