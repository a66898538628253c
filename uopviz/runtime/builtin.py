"""Registers the built-in runtimes; each is imported only when its device is first used. CPU, CL and PYTHON take
an index (`CPU:1`): a runtime of its own per index."""

from __future__ import annotations

from uopviz.runtime.device import Runtime, register


def _cpu(index: str | None) -> Runtime:
    from uopviz.runtime.cpu import CPURuntime
    return CPURuntime(index)


def _cl(index: str | None) -> Runtime:
    from uopviz.runtime.cl import CLRuntime
    return CLRuntime(index)


def _cuda(index: str | None) -> Runtime:
    from uopviz.runtime.cuda import CUDARuntime
    return CUDARuntime()


def _python(index: str | None) -> Runtime:
    from uopviz.runtime.python import PythonRuntime
    return PythonRuntime(index)


register("CPU", _cpu, indexed=True)
register("CL", _cl, indexed=True)
register("PYTHON", _python, indexed=True)
register("CUDA", _cuda)
