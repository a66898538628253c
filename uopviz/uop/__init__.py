"""The UOp IR: ops, derived properties, validation, pattern rewriting and symbolic simplification."""

from uopviz.uop.ops import (
    AddrSpace,
    AxisType,
    BufferArg,
    ConstArg,
    GroupOp,
    LoadArg,
    Ops,
    ParamArg,
    RangeArg,
    ReduceArg,
    SliceArg,
    SpecError,
    UOp,
    VarArg,
    toposort,
)

__all__ = ["AddrSpace", "AxisType", "BufferArg", "ConstArg", "GroupOp", "LoadArg", "Ops", "ParamArg", "RangeArg",
           "ReduceArg", "SliceArg", "SpecError", "UOp", "VarArg", "toposort"]
