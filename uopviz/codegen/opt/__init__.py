"""Kernel optimizations: SPEC's OptOps, the Scheduler that applies them, and the default heuristic."""

from uopviz.codegen.opt.scheduler import KernelOptError, Opt, OptOps, Scheduler

__all__ = ["KernelOptError", "Opt", "OptOps", "Scheduler"]
