"""The ops of the UOp dialect (SPEC.md), their groups, AxisTypes, structured args, and the hash-consed UOp node."""

from __future__ import annotations

import enum
import functools
import math
import weakref
from _weakref import _remove_dead_weakref  # type: ignore[attr-defined]  # private C helper; typeshed omits it
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, ClassVar, Generic, NamedTuple, TypeGuard, TypeVar, overload

from uopviz.dtype import DType, dtypes


class Ops(enum.Enum):
    """Every op of SPEC.md, plus COPY, DEFINE_VAR and BIND from the seeds. Values are SPEC's spellings."""

    # source
    PARAM = "Param"; BUFFER = "Buffer"; CONST = "Const"; BINARY = "Binary"  # noqa: E702
    # movement
    PERMUTE = "Permute"; FLIP = "Flip"; RESHAPE = "Reshape"; EXPAND = "Expand"; PAD = "Pad"  # noqa: E702
    SHRINK = "Shrink"; INDEX = "Index"; STACK = "Stack"; REPLICATED = "Replicated"; SLICE = "Slice"  # noqa: E702
    BITCAST = "Bitcast"
    # reduce
    REDUCE = "Reduce"
    # call
    FUNCTION = "Function"; CALL = "Call"; TUPLE = "Tuple"; GETTUPLE = "GetTuple"  # noqa: E702
    # load / store / copy
    LOAD = "Load"; STORE = "Store"; COPY = "Copy"  # noqa: E702
    # ordering
    RANGE = "Range"; END = "End"; AFTER = "After"; GROUP = "Group"; SINK = "Sink"; LINEAR = "Linear"  # noqa: E702
    # elementwise primitives
    RECIP = "Recip"; TRUNC = "Trunc"; CAST = "Cast"  # noqa: E702
    ADD = "Add"; MUL = "Mul"; MAX = "Max"; MOD = "Mod"; IDIV = "Idiv"; CMPLT = "CmpLt"; CMPNE = "CmpNe"  # noqa: E702
    XOR = "Xor"; OR = "Or"; AND = "And"; SHR = "Shr"; SHL = "Shl"  # noqa: E702
    WHERE = "Where"
    # decomposed elementwise
    NEG = "Neg"; SUB = "Sub"; DIV = "Div"; CMPGT = "CmpGt"; CMPGE = "CmpGe"; CMPLE = "CmpLe"  # noqa: E702
    CMPEQ = "CmpEq"; NOT = "Not"; EXP2 = "Exp2"; LOG2 = "Log2"; SIN = "Sin"; SQRT = "Sqrt"; POW = "Pow"  # noqa: E702
    MULACC = "Mulacc"; THREEFRY = "Threefry"  # noqa: E702
    # markers
    CONTIGUOUS = "Contiguous"; CONTIGUOUS_BACKWARD = "ContiguousBackward"; DETACH = "Detach"  # noqa: E702
    # codegen
    BARRIER = "Barrier"; INS = "Ins"; SPECIAL = "Special"; IF = "If"; ENDIF = "Endif"; WMMA = "Wmma"  # noqa: E702
    CUSTOM = "Custom"; ATOMIC_ADD = "AtomicAdd"; CUSTOM_FUNCTION = "CustomFunction"; PROGRAM = "Program"  # noqa: E702
    SOURCE = "Source"; PREFETCH = "Prefetch"  # noqa: E702
    # symbolic variables (seed 001)
    DEFINE_VAR = "DefineVar"; BIND = "Bind"  # noqa: E702

    def __repr__(self) -> str:
        return f"Ops.{self.name}"

    __hash__ = object.__hash__  # members are singletons; Enum's name-hashing __hash__ is hot in pattern dispatch


_CONST = Ops.CONST  # for UOp.__new__: reading an Enum's member (Ops.CONST) costs a call in Python 3.11


class GroupOp:
    """SPEC's op groups. `Colour` gives the group colours used to draw graphs."""

    Source = frozenset({Ops.PARAM, Ops.BUFFER, Ops.CONST, Ops.BINARY})
    Movement = frozenset({Ops.PERMUTE, Ops.FLIP, Ops.RESHAPE, Ops.EXPAND, Ops.PAD, Ops.SHRINK, Ops.INDEX, Ops.STACK,
                          Ops.REPLICATED, Ops.SLICE, Ops.BITCAST})
    Reduce = frozenset({Ops.REDUCE})
    Call = frozenset({Ops.FUNCTION, Ops.CALL, Ops.TUPLE, Ops.GETTUPLE})
    Load = frozenset({Ops.LOAD, Ops.COPY})
    Store = frozenset({Ops.STORE})
    Ordering = frozenset({Ops.RANGE, Ops.END, Ops.AFTER, Ops.GROUP, Ops.SINK, Ops.LINEAR})
    Unary = frozenset({Ops.RECIP, Ops.TRUNC, Ops.CAST})
    Binary = frozenset({Ops.ADD, Ops.MUL, Ops.MAX, Ops.MOD, Ops.IDIV, Ops.CMPLT, Ops.CMPNE, Ops.XOR, Ops.OR, Ops.AND,
                        Ops.SHR, Ops.SHL})
    Ternary = frozenset({Ops.WHERE})
    Decomposed = frozenset({Ops.NEG, Ops.SUB, Ops.DIV, Ops.CMPGT, Ops.CMPGE, Ops.CMPLE, Ops.CMPEQ, Ops.NOT, Ops.EXP2,
                            Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.POW, Ops.MULACC, Ops.THREEFRY})
    ALU = Unary | Binary | Ternary
    Elementwise = ALU | Decomposed
    Marker = frozenset({Ops.CONTIGUOUS, Ops.CONTIGUOUS_BACKWARD, Ops.DETACH})
    Codegen = frozenset({Ops.BARRIER, Ops.INS, Ops.SPECIAL, Ops.IF, Ops.ENDIF, Ops.WMMA, Ops.CUSTOM, Ops.ATOMIC_ADD,
                         Ops.CUSTOM_FUNCTION, Ops.PROGRAM, Ops.SOURCE, Ops.PREFETCH})
    Symbolic = frozenset({Ops.DEFINE_VAR, Ops.BIND})
    Comparison = frozenset({Ops.CMPLT, Ops.CMPNE, Ops.CMPGT, Ops.CMPGE, Ops.CMPLE, Ops.CMPEQ})
    Commutative = frozenset({Ops.ADD, Ops.MUL, Ops.MAX, Ops.CMPNE, Ops.XOR, Ops.OR, Ops.AND, Ops.CMPEQ})
    Associative = frozenset({Ops.ADD, Ops.MUL, Ops.MAX, Ops.XOR, Ops.OR, Ops.AND})
    Colour: ClassVar[dict[str, str]] = {
        "Movement": "#2E7D32", "Reduce": "#C62828", "Elementwise": "#F9A825", "Call": "#1565C0",
        "Store": "#7B1FA2", "Load": "#C08080", "Ordering": "#795548", "Marker": "#E65100",
    }

    @staticmethod
    def group_of(op: Ops) -> str:
        """The colour group SPEC draws `op` in ('Other' for source, codegen and symbolic ops)."""
        for name in ("Movement", "Reduce", "Elementwise", "Call", "Store", "Load", "Ordering", "Marker"):
            if op in getattr(GroupOp, name):
                return name
        return "Other"


class AxisType(enum.Enum):
    """Range types of SPEC's OptOps table: (letter, colour, priority). Lower priority sorts first in a kernel."""

    GLOBAL = ("g", "#1565C0", 0)
    THREAD = ("t", "#42A5F5", 1)
    LOCAL = ("l", "#00838F", 2)
    WARP = ("w", "#00ACC1", 3)
    LOOP = ("L", "#616161", 4)
    GROUP_REDUCE = ("G", "#E53935", 5)
    REDUCE = ("R", "#C62828", 6)
    UPCAST = ("u", "#F9A825", 7)
    UNROLL = ("r", "#7B1FA2", 8)

    @property
    def letter(self) -> str:
        return self.value[0]

    @property
    def colour(self) -> str:
        return self.value[1]

    @property
    def priority(self) -> int:
        return self.value[2]

    @staticmethod
    def from_letter(letter: str) -> AxisType:
        for t in AxisType:
            if t.letter == letter:
                return t
        raise ValueError(f"no AxisType has letter {letter!r}")

    def __repr__(self) -> str:
        return f"AxisType.{self.name}"


class AddrSpace(enum.Enum):
    """Where a Buffer lives."""

    GLOBAL = "GLOBAL"; LOCAL = "LOCAL"; REG = "REG"  # noqa: E702

    def __repr__(self) -> str:
        return f"AddrSpace.{self.name}"


Device = str | tuple[str, ...] | None


class BufferArg(NamedTuple):
    """`uid` tells allocations apart: two buffers of equal size, dtype and device are different memory."""

    size: int
    dtype: DType
    device: Device = "CPU"
    addrspace: AddrSpace = AddrSpace.GLOBAL
    uid: int = 0


class ParamArg(NamedTuple):
    slot: int
    dtype: DType
    device: Device = None
    addrspace: AddrSpace | None = None


class ConstArg(NamedTuple):
    value: bool | int | float
    dtype: DType


class ReduceArg(NamedTuple):
    op: Ops
    axes: tuple[int, ...] = ()


class RangeArg(NamedTuple):
    """`idx` tells ranges of equal bound apart (hash-consing would merge them otherwise)."""

    idx: int
    type: AxisType = AxisType.LOOP


class LoadArg(NamedTuple):
    device: Device = None
    addrspace: AddrSpace | None = None


class SliceArg(NamedTuple):
    size: int
    dtype: DType


class VarArg(NamedTuple):
    """A symbolic integer variable (DEFINE_VAR) named `name` with min..max inclusive."""

    name: str
    min: int
    max: int


class SpecError(ValueError):
    """A node breaks a rule of SPEC.md. The message names the op, the offending source and the rule."""

    def __init__(self, node: UOp, message: str, src: int | None = None, rule: str = "") -> None:
        self.node, self.src, self.rule = node, src, rule
        where = f" (src[{src}] {node.src[src].op.value})" if src is not None and src < len(node.src) else ""
        super().__init__(f"{node.op.value}: {message}{where}")


class TensorCore(NamedTuple):
    """A Wmma's config: one warp-level matrix multiply-accumulate D = A·B + C, A of M×K, B of K×N, C and D of M×N.

    Each lane of the warp holds a fragment of every operand. `a`, `b` and `c` say which: each is (lane bits,
    element bits), naming for every bit of the lane id and of an element's position in the lane's fragment (lowest
    first) the coordinate bit it is ("m0" is bit 0 of the row, "k3" bit 3 of the reduction index, "n1" bit 1 of the
    column). So the whole layout is data: the renderer spells the instruction, the PYTHON runtime gathers the
    matrices by it, and the TC opt splits a kernel's axes by it (codegen/tc.py).
    """

    name: str  # the shape as the instruction names it: "m16n8k16"
    dims: tuple[int, int, int]  # (M, N, K)
    dtype_in: DType
    dtype_out: DType
    a: tuple[tuple[str, ...], tuple[str, ...]]
    b: tuple[tuple[str, ...], tuple[str, ...]]
    c: tuple[tuple[str, ...], tuple[str, ...]]


ARG_TYPES: tuple[type, ...] = (BufferArg, ParamArg, ConstArg, ReduceArg, RangeArg, LoadArg, SliceArg, VarArg,
                               TensorCore)


_T = TypeVar("_T")


class _derived(Generic[_T]):
    """A derived property of a UOp, computed on first read and kept in the node's __dict__ (where later reads find
    it before this non-data descriptor): functools.cached_property without the lock it takes on every first read in
    Python 3.11, a cost paid for each of the many nodes an eager step builds. The value is a function of the node
    alone, so two threads computing it at once store the same. Sources lacking it are filled first, iteratively, so
    deep graphs never recurse (a source whose own sources have it, the common case of a node built on a new one,
    without a walk)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.rule: Callable[[UOp], Any] | None = None  # props.DERIVE[name], looked up on first use (props imports us)

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> _derived[_T]: ...
    @overload
    def __get__(self, obj: UOp, owner: type | None = None) -> _T: ...

    def __get__(self, obj: UOp | None, owner: type | None = None) -> _T | _derived[_T]:
        if obj is None:
            return self
        name, rule = self.name, self.rule or self._rule()
        for s in obj.src:
            if name not in s.__dict__:
                for x in s.src:  # a loop, not any() over a generator: a view of a new view comes here often
                    if name not in x.__dict__:
                        _fill(s, name, rule)
                        break
                else:
                    s.__dict__[name] = rule(s)
        value = obj.__dict__[name] = rule(obj)
        return value

    def _rule(self) -> Callable[[UOp], Any]:
        from uopviz.uop import props
        self.rule = props.DERIVE[self.name]
        return self.rule


def _fill(root: UOp, name: str, rule: Callable[[UOp], Any]) -> None:
    """Derive the property `name` of root and of every node below it that lacks it, sources first, without
    recursion. A node that has it is done, and one met again below another is done by then (a graph has no cycles)."""
    stack = [(root, iter(root.src))]
    while stack:
        node, it = stack[-1]
        for s in it:
            if name not in s.__dict__:
                stack.append((s, iter(s.src)))
                break
        else:
            stack.pop()
            if name not in node.__dict__:
                node.__dict__[name] = rule(node)


class _Entry(weakref.ref):
    """The hash-cons table's weak reference to a node, holding the node's key, so that one shared callback can drop
    the entry when the node dies (a functools.partial per node was one more object for every collection to scan)."""

    __slots__ = ("key",)
    key: tuple[Any, ...]


_nodes: dict[tuple[Any, ...], _Entry] = {}
"""The hash-cons table: key -> weak reference to the live node. A plain dict read inline (WeakValueDictionary's get
is a Python call per node built, and its KeyedRef a Python class); a node's entry goes when it dies, unless a new
node took the key meanwhile."""


def _forget(ref: _Entry) -> None:
    _remove_dead_weakref(_nodes, ref.key)


_on_built: Callable[[UOp], None] | None = None
"""Called with every node built, new or found in the table (None: nothing to call; uopviz.trace.origins sets it
while a trace or profile records, to note which Tensor op and user line made the node: a node some earlier code
built, such as a gradient's expanded constant, is still this line's work)."""


def on_node_built(fn: Callable[[UOp], None] | None) -> Callable[[UOp], None] | None:
    """Install the hook called with each node built (None: none); returns the previous one."""
    global _on_built
    prev, _on_built = _on_built, fn
    return prev


class Built:
    """What this process has built so far: `several_devices`, whether any node names several devices (a Buffer,
    Param or Load of a multi-device, a Copy to one). Until one is, no graph holds one, so the front-end's check
    for multi-device graphs (a walk of every graph realized) is answered without a walk."""

    several_devices: bool = False


_NAMES_DEVICES = frozenset({Ops.BUFFER, Ops.PARAM, Ops.COPY, Ops.LOAD})


def _names_several_devices(op: Ops, arg: Any) -> bool:
    """Whether a node of op and arg names several devices itself (uopviz.tensor.multi's test, on the arg)."""
    if op is Ops.COPY:
        return isinstance(arg, tuple)
    return arg is not None and isinstance(getattr(arg, "device", None), tuple)


def _const_key(arg: ConstArg) -> tuple[Any, ...]:
    """Intern key of a Const: 0.0/-0.0 and 1/1.0/True must stay distinct nodes, and NaN must equal itself."""
    v = arg.value
    return (type(v).__name__, repr(v) if isinstance(v, float) else v, arg.dtype)


class UOp:
    """An immutable, hash-consed node `(op, src, arg, tag)`: building the same tuple twice gives the same object.

    Equality is identity. Derived properties (dtype, shape, device, min_max, axis) are computed once per node
    by `uopviz.uop.props`; building a node does not validate it (see `uopviz.uop.spec.validate`).
    """

    __slots__ = ("__dict__", "__weakref__", "arg", "op", "src", "tag")
    op: Ops
    src: tuple[UOp, ...]
    arg: Any
    tag: Any

    def __new__(cls, op: Ops, src: tuple[UOp, ...] = (), arg: Any = None, tag: Any = None) -> UOp:
        key = (op, src, _const_key(arg) if op is _CONST else arg, tag)
        if (ref := _nodes.get(key)) is not None and (hit := ref()) is not None:
            if _on_built is not None:
                _on_built(hit)
            return hit
        self = _new_object(cls)
        _set_op(self, op)  # the slots' own setters: __setattr__ refuses, and object.__setattr__ looks each name up
        _set_src(self, src)
        _set_arg(self, arg)
        _set_tag(self, tag)
        entry = _nodes[key] = _Entry(self, _forget)
        entry.key = key
        if op in _NAMES_DEVICES and not Built.several_devices and _names_several_devices(op, arg):
            Built.several_devices = True
        if _on_built is not None:
            _on_built(self)
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"UOp is immutable; build a new one with .replace({name}=...)")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("UOp is immutable")

    def __reduce__(self) -> tuple[Any, ...]:
        return (UOp, (self.op, self.src, self.arg, self.tag))

    def __copy__(self) -> UOp:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> UOp:
        return self

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        raise TypeError("a UOp has no truth value; compare with .eq()/.ne() and decide with .resolve()")

    def replace(self, **kw: Any) -> UOp:
        """This node with some of op/src/arg/tag changed (the same node if nothing changes)."""
        return UOp(kw.get("op", self.op), kw.get("src", self.src), kw.get("arg", self.arg), kw.get("tag", self.tag))

    # ---- derived properties (rules in props.py) ----
    dtype: _derived[DType] = _derived("dtype")
    shape: _derived[tuple[int | UOp, ...]] = _derived("shape")
    device: _derived[Device] = _derived("device")
    min_max: _derived[tuple[Any, Any]] = _derived("min_max")
    axis: _derived[int | None] = _derived("axis")

    @property
    def vmin(self) -> Any:
        return self.min_max[0]

    @property
    def vmax(self) -> Any:
        return self.min_max[1]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int | UOp:
        """Number of elements (a UOp when the shape is symbolic)."""
        return prod(self.shape)

    # ---- graph walking ----
    def toposort(self) -> list[UOp]:
        """Every node reachable from self, sources before users, self last. Iterative: deep graphs are fine."""
        return toposort([self])

    def sparents(self) -> set[UOp]:
        return set(self.toposort())

    def substitute(self, mapping: Mapping[UOp, UOp], rebuilt: dict[UOp, UOp] | None = None) -> UOp:
        """Replace nodes by the mapping everywhere below (and including) self, rebuilding the users. `rebuilt`, where
        given, is filled with what each node under self became (for what a node carries beside its graph)."""
        if not mapping:
            return self
        out: dict[UOp, UOp] = {} if rebuilt is None else rebuilt
        for u in self.toposort():
            if u in mapping:
                out[u] = mapping[u]
            else:
                new_src = tuple(out[s] for s in u.src)
                out[u] = u if new_src == u.src else u.replace(src=new_src)
        return out[self]

    def simplify(self) -> UOp:
        """Symbolic simplification (uopviz.uop.symbolic) of the graph under self."""
        from uopviz.uop.pattern import graph_rewrite
        from uopviz.uop.symbolic import symbolic
        return graph_rewrite(self, symbolic, name="simplify")

    # ---- printing (printer.py) ----
    def __repr__(self) -> str:
        from uopviz.uop.printer import one_line
        return one_line(self)

    def render(self) -> str:
        """Infix rendering of an index/ALU expression, e.g. `((r0*4)+r1)`."""
        from uopviz.uop.printer import render_expr
        return render_expr(self)

    def tree(self) -> str:
        """Multi-line tree; shared nodes are printed once and referred to as `^n` after."""
        from uopviz.uop.printer import tree
        return tree(self)

    # ---- constants and resolution ----
    @staticmethod
    def const(dtype: DType, value: bool | int | float) -> UOp:
        """A scalar constant; the value is normalized to the dtype (wrapped, rounded) as memory would hold it."""
        return UOp(Ops.CONST, (), ConstArg(dtype.normalize(value), dtype))

    def const_like(self, value: bool | int | float) -> UOp:
        return UOp.const(self.dtype, value)

    @property
    def is_const(self) -> bool:
        return self.op is Ops.CONST

    @property
    def value(self) -> bool | int | float:
        """The value of a Const."""
        if self.op is not Ops.CONST:
            raise ValueError(f"{self.op.value} has no constant value")
        return self.arg.value

    def resolve(self, default: bool | None = None) -> bool:
        """Decide a boolean expression from its bounds; raise (or return default) if the bounds do not decide it."""
        lo, hi = self.min_max
        if lo == hi:
            return bool(lo)
        if default is None:
            raise ValueError(f"cannot decide {self.render()} from its bounds [{lo}, {hi}]")
        return default

    # ---- builders ----
    @staticmethod
    def shape_src(shape: Iterable[int | UOp]) -> UOp:
        """A shape as a source: a Stack of index scalars (symbolic sizes allowed)."""
        dims = tuple(shape)
        if all_ints(dims):
            return _int_shape(dims)
        return UOp(Ops.STACK, tuple(_as_index(s) for s in dims))

    @staticmethod
    def buffer(size: int, dtype: DType = dtypes.float32, device: Device = "CPU",
               addrspace: AddrSpace = AddrSpace.GLOBAL, uid: int = 0) -> UOp:
        return UOp(Ops.BUFFER, (), BufferArg(size, dtype, device, addrspace, uid))

    @staticmethod
    def param(slot: int, shape: Iterable[int | UOp], dtype: DType = dtypes.float32, device: Device = None,
              addrspace: AddrSpace | None = None) -> UOp:
        return UOp(Ops.PARAM, (UOp.shape_src(shape),), ParamArg(slot, dtype, device, addrspace))

    @staticmethod
    def range(bound: int | UOp, idx: int, type: AxisType = AxisType.LOOP) -> UOp:
        return UOp(Ops.RANGE, (_as_index(bound),), RangeArg(idx, type))

    @staticmethod
    def variable(name: str, vmin: int, vmax: int) -> UOp:
        return UOp(Ops.DEFINE_VAR, (), VarArg(name, vmin, vmax))

    @staticmethod
    def special(bound: int | UOp, name: str) -> UOp:
        return UOp(Ops.SPECIAL, (_as_index(bound),), name)

    @staticmethod
    def sink(*srcs: UOp) -> UOp:
        return UOp(Ops.SINK, srcs)

    def bind(self, value: int) -> UOp:
        """This DefineVar with a value for one use; ValueError outside its range."""
        if self.op is not Ops.DEFINE_VAR:
            raise ValueError(f"only a variable can be bound, not {self.op.value}")
        a = self.arg
        if isinstance(value, bool) or not isinstance(value, int) or not a.min <= value <= a.max:
            raise ValueError(f"cannot bind {a.name} to {value!r}: it takes ints in {a.min}..{a.max}")
        return UOp(Ops.BIND, (self, UOp.const(dtypes.index, value)))

    def reshape(self, shape: Iterable[int | UOp]) -> UOp:
        return UOp(Ops.RESHAPE, (self, UOp.shape_src(shape)))

    def expand(self, shape: Iterable[int | UOp]) -> UOp:
        return UOp(Ops.EXPAND, (self, UOp.shape_src(shape)))

    def permute(self, order: Iterable[int]) -> UOp:
        return UOp(Ops.PERMUTE, (self,), tuple(order))

    def flip(self, flags: Iterable[bool]) -> UOp:
        return UOp(Ops.FLIP, (self,), tuple(bool(f) for f in flags))

    def pad(self, offsets: Iterable[int | UOp], shape: Iterable[int | UOp]) -> UOp:
        return UOp(Ops.PAD, (self, UOp.shape_src(offsets), UOp.shape_src(shape)))

    def shrink(self, offsets: Iterable[int | UOp], shape: Iterable[int | UOp]) -> UOp:
        return UOp(Ops.SHRINK, (self, UOp.shape_src(offsets), UOp.shape_src(shape)))

    def index(self, *idxs: UOp | int) -> UOp:
        return UOp(Ops.INDEX, (self, *(_as_index(i) for i in idxs)))

    def replicated(self, axes: Iterable[int]) -> UOp:
        return UOp(Ops.REPLICATED, (self,), tuple(axes))

    def copy_to(self, device: Device) -> UOp:
        return UOp(Ops.COPY, (self,), device)

    def reduce(self, op: Ops, *ranges: UOp, axes: Iterable[int] = ()) -> UOp:
        """Reduce over axis numbers (before rangeify) or over ranges (after)."""
        return UOp(Ops.REDUCE, (self, *ranges), ReduceArg(op, tuple(axes)))

    def load(self, *gate: UOp, device: Device = None, addrspace: AddrSpace | None = None) -> UOp:
        return UOp(Ops.LOAD, (self, *gate), LoadArg(device, addrspace))

    def store(self, value: UOp, *gate: UOp) -> UOp:
        return UOp(Ops.STORE, (self, value, *gate))

    def end(self, *ranges: UOp) -> UOp:
        """Close each range, innermost first: End(End(body, r_inner), r_outer)."""
        out = self
        for r in reversed(ranges):
            out = UOp(Ops.END, (out, r))
        return out

    def after(self, *deps: UOp) -> UOp:
        return UOp(Ops.AFTER, (self, *deps))

    def memory(self) -> UOp:
        """The Buffer or Param this value is, through the Afters that order it after other work."""
        u = self
        while u.op is Ops.AFTER:
            u = u.src[0]
        return u

    def cast(self, dtype: DType) -> UOp:
        return self if self.dtype == dtype else UOp(Ops.CAST, (self,), dtype)

    def bitcast(self, dtype: DType) -> UOp:
        return UOp(Ops.BITCAST, (self,), dtype)

    def alu(self, op: Ops, *others: UOp | bool | int | float) -> UOp:
        return UOp(op, (self, *(self._operand(o) for o in others)))

    def _operand(self, x: UOp | bool | int | float) -> UOp:
        return x if isinstance(x, UOp) else UOp.const(self.dtype, x)

    def where(self, a: UOp | bool | int | float, b: UOp | bool | int | float) -> UOp:
        a_u = a if isinstance(a, UOp) else (b.const_like(a) if isinstance(b, UOp) else UOp.const(dtypes.from_py(a), a))
        return UOp(Ops.WHERE, (self, a_u, a_u._operand(b)))

    # arithmetic builds SPEC primitives (Sub = Add(a, Mul(b, -1)), ...), so the simplifier sees one form
    def __add__(self, x: UOp | int | float) -> UOp:
        return self.alu(Ops.ADD, x)

    def __radd__(self, x: int | float) -> UOp:
        return self._operand(x).alu(Ops.ADD, self)

    def __mul__(self, x: UOp | int | float) -> UOp:
        return self.alu(Ops.MUL, x)

    def __rmul__(self, x: int | float) -> UOp:
        return self._operand(x).alu(Ops.MUL, self)

    def __neg__(self) -> UOp:
        return self.alu(Ops.MUL, -1) if not self.dtype.is_bool else self.logical_not()

    def __sub__(self, x: UOp | int | float) -> UOp:
        return self + (-self._operand(x))

    def __rsub__(self, x: int | float) -> UOp:
        return self._operand(x) + (-self)

    def __floordiv__(self, x: UOp | int) -> UOp:
        return self.alu(Ops.IDIV, x)

    def __rfloordiv__(self, x: int) -> UOp:
        return self._operand(x).alu(Ops.IDIV, self)

    def __mod__(self, x: UOp | int) -> UOp:
        return self.alu(Ops.MOD, x)

    def __rmod__(self, x: int) -> UOp:
        return self._operand(x).alu(Ops.MOD, self)

    def __truediv__(self, x: UOp | float) -> UOp:
        return self * self._operand(x).alu(Ops.RECIP)

    def __lt__(self, x: UOp | int | float) -> UOp:
        return self.alu(Ops.CMPLT, x)

    def __gt__(self, x: UOp | int | float) -> UOp:
        return self._operand(x).alu(Ops.CMPLT, self)

    def __le__(self, x: UOp | int | float) -> UOp:
        return (self > x).logical_not()

    def __ge__(self, x: UOp | int | float) -> UOp:
        return (self < x).logical_not()

    def __and__(self, x: UOp | int | bool) -> UOp:
        return self.alu(Ops.AND, x)

    def __or__(self, x: UOp | int | bool) -> UOp:
        return self.alu(Ops.OR, x)

    def __xor__(self, x: UOp | int | bool) -> UOp:
        return self.alu(Ops.XOR, x)

    def __lshift__(self, x: UOp | int) -> UOp:
        return self.alu(Ops.SHL, x)

    def __rshift__(self, x: UOp | int) -> UOp:
        return self.alu(Ops.SHR, x)

    def ne(self, x: UOp | int | float | bool) -> UOp:
        return self.alu(Ops.CMPNE, x)

    def eq(self, x: UOp | int | float | bool) -> UOp:
        return self.ne(x).logical_not()

    def logical_not(self) -> UOp:
        return self.alu(Ops.CMPNE, True)

    def maximum(self, x: UOp | int | float) -> UOp:
        return self.alu(Ops.MAX, x)

    def minimum(self, x: UOp | int | float) -> UOp:
        return -((-self).maximum(-self._operand(x)))

    def recip(self) -> UOp:
        return self.alu(Ops.RECIP)

    def trunc(self) -> UOp:
        return self.alu(Ops.TRUNC)


_new_object = object.__new__
_set_op, _set_src, _set_arg, _set_tag = (UOp.__dict__[n].__set__ for n in ("op", "src", "arg", "tag"))

def _as_index(x: int | UOp) -> UOp:
    if type(x) is int:
        return _index_const(x)
    if isinstance(x, UOp):
        return x
    if isinstance(x, bool) or not isinstance(x, int):
        raise TypeError(f"expected an int or an index UOp, got {type(x).__name__} {x!r}")
    return UOp.const(dtypes.index, x)


@functools.lru_cache(maxsize=4096)
def _index_const(x: int) -> UOp:
    """An index Const, kept while used often: shapes and offsets name the same few ints in every op a Tensor builds,
    and each built anew costs a normalize and a hash-cons lookup."""
    return UOp.const(dtypes.index, x)


@overload
def all_ints(xs: tuple[object, ...]) -> TypeGuard[tuple[int, ...]]: ...
@overload
def all_ints(xs: Iterable[object]) -> bool: ...
def all_ints(xs: Iterable[object]) -> bool:
    """Whether every item is an int (not a bool, not a symbolic size): a loop, twice as fast as all() over a
    generator, which every shape the front-end builds is checked with. A tuple it accepts is a tuple of ints to
    the type checker."""
    for x in xs:  # noqa: SIM110 (all() over a generator is the slower form this replaces)
        if type(x) is not int:
            return False
    return True


@functools.lru_cache(maxsize=4096)
def _int_shape(dims: tuple[int, ...]) -> UOp:
    """A shape of ints as its Stack, kept while used often (as _index_const)."""
    return UOp(Ops.STACK, tuple(_index_const(d) for d in dims))


def toposort(roots: Iterable[UOp], gate: Callable[[UOp], bool] | None = None) -> list[UOp]:
    """Nodes reachable from roots, each after all of its sources. `gate(u)` False stops descent below u."""
    seen: set[UOp] = set()
    out: list[UOp] = []
    for root in roots:
        if root in seen:
            continue
        stack: list[tuple[UOp, Iterator[UOp]]] = [(root, iter(root.src if gate is None or gate(root) else ()))]
        seen.add(root)
        while stack:
            node, it = stack[-1]
            for s in it:
                if s not in seen:
                    seen.add(s)
                    stack.append((s, iter(s.src if gate is None or gate(s) else ())))
                    break
            else:
                stack.pop()
                out.append(node)
    return out


@overload
def prod(xs: Iterable[int]) -> int: ...
@overload
def prod(xs: Iterable[int | UOp]) -> int | UOp: ...
def prod(xs: Iterable[int | UOp]) -> int | UOp:
    """The product, left to right from 1 (a UOp once a size is symbolic): math.prod, whose loop over ints is C."""
    return math.prod(xs)
