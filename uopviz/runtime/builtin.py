"""Registers the built-in runtimes; each is imported only when its device is first used."""

from __future__ import annotations

from uopviz.runtime.device import Runtime, register


def _cpu() -> Runtime:
    from uopviz.runtime.cpu import CPURuntime
    return CPURuntime()


def _cl() -> Runtime:
    from uopviz.runtime.cl import CLRuntime
    return CLRuntime()


def _cuda() -> Runtime:
    from uopviz.runtime.cuda import CUDARuntime
    return CUDARuntime()


def _python() -> Runtime:
    from uopviz.runtime.python import PythonRuntime
    return PythonRuntime()


register("CPU", _cpu)
register("CL", _cl)
register("PYTHON", _python)
register("CUDA", _cuda)
