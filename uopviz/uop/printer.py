"""Readable renderings of UOp graphs: infix expressions, one-line summaries and indented trees."""

from __future__ import annotations

from typing import Any

from uopviz.uop.ops import GroupOp, Ops, UOp, toposort

_INFIX = {Ops.ADD: "+", Ops.MUL: "*", Ops.IDIV: "//", Ops.MOD: "%", Ops.CMPLT: "<", Ops.CMPNE: "!=", Ops.XOR: "^",
          Ops.OR: "|", Ops.AND: "&", Ops.SHL: "<<", Ops.SHR: ">>", Ops.SUB: "-", Ops.DIV: "/", Ops.CMPGT: ">",
          Ops.CMPGE: ">=", Ops.CMPLE: "<=", Ops.CMPEQ: "=="}


def fmt_arg(arg: Any) -> str:
    """Short text of an arg: NamedTuples as `Name(field=...)`, enums and dtypes by name."""
    if isinstance(arg, tuple) and hasattr(arg, "_fields"):
        return f"{type(arg).__name__}(" + ", ".join(f"{k}={fmt_arg(v)}" for k, v in zip(arg._fields, arg)) + ")"
    if isinstance(arg, tuple):
        return "(" + ", ".join(fmt_arg(a) for a in arg) + ("," if len(arg) == 1 else "") + ")"
    return repr(arg)


def range_name(u: UOp) -> str:
    """`r3` style name of a Range (its idx), as kernels and expressions print it."""
    return f"r{u.arg.idx}"


def render_expr(u: UOp, max_nodes: int = 200) -> str:
    """Infix text of an index/ALU expression; non-arithmetic nodes show as `Op(...)`. Iterative (deep graphs ok)."""
    out: dict[UOp, str] = {}
    nodes = toposort([u])
    if len(nodes) > max_nodes:
        return f"<{u.op.value} graph of {len(nodes)} nodes>"
    for n in nodes:
        s = [out[x] for x in n.src]
        if n.op is Ops.CONST:
            v = n.arg.value
            out[n] = repr(v) if not isinstance(v, bool) else str(v)
        elif n.op is Ops.RANGE:
            out[n] = range_name(n)
        elif n.op is Ops.DEFINE_VAR:
            out[n] = n.arg.name
        elif n.op is Ops.SPECIAL:
            out[n] = str(n.arg)
        elif n.op is Ops.BIND:
            out[n] = f"{s[0]}={s[1]}"
        elif n.op in _INFIX and len(s) == 2:
            if n.op is Ops.ADD and n.src[1].op is Ops.MUL and n.src[1].src[1].op is Ops.CONST \
                    and n.src[1].src[1].arg.value == -1:
                out[n] = f"({s[0]}-{out[n.src[1].src[0]]})"
            elif n.op is Ops.MUL and n.src[1].op is Ops.CONST and n.src[1].arg.value == -1:
                out[n] = f"-{s[0]}"
            elif n.op is Ops.CMPNE and n.src[1].op is Ops.CONST and n.src[1].arg.value is True:
                out[n] = f"!{s[0]}"
            else:
                out[n] = f"({s[0]}{_INFIX[n.op]}{s[1]})"
        elif n.op is Ops.WHERE:
            out[n] = f"({s[0]}?{s[1]}:{s[2]})"
        elif n.op is Ops.MAX:
            out[n] = f"max({s[0]}, {s[1]})"
        elif n.op is Ops.CAST:
            out[n] = f"({n.arg.name}){s[0]}"
        elif n.op is Ops.STACK:
            out[n] = "[" + ", ".join(s) + "]"
        else:
            inner = ", ".join(s + ([fmt_arg(n.arg)] if n.arg is not None else []))
            out[n] = f"{n.op.value}({inner})"
    return out[u]


def _props(u: UOp) -> str:
    try:
        shape = u.shape
    except Exception as e:  # an invalid node still prints; its shape error is shown instead
        return f"{u.dtype.name} <{type(e).__name__}>" if u.op is not Ops.STACK else ""
    dims = ",".join(str(d) if isinstance(d, int) else d.render() for d in shape)
    return f"{u.dtype.name}({dims})" if shape else u.dtype.name


def one_line(u: UOp) -> str:
    """`Add:int32() (r0+4)` for expressions, `Reshape:float32(3,4) [2 src]` otherwise."""
    head = f"{u.op.value}:{_props(u)}"
    if u.op in GroupOp.ALU or u.op in (Ops.CONST, Ops.RANGE, Ops.DEFINE_VAR, Ops.SPECIAL, Ops.BIND):
        return f"{head} {render_expr(u, max_nodes=40)}"
    arg = "" if u.arg is None else f" {fmt_arg(u.arg)}"
    tag = "" if u.tag is None else f" tag={u.tag!r}"
    return f"{head}{arg}{tag} [{len(u.src)} src]"


def tree(u: UOp, max_lines: int = 2000) -> str:
    """Indented tree, root first. A node already printed is referred to by its number (`^n`)."""
    number: dict[UOp, int] = {}
    lines: list[str] = []
    stack: list[tuple[UOp, int]] = [(u, 0)]
    while stack and len(lines) < max_lines:
        n, depth = stack.pop()
        pad = "  " * depth
        if n in number:
            lines.append(f"{pad}^{number[n]} {n.op.value}")
            continue
        number[n] = len(number)
        arg = "" if n.arg is None else " " + fmt_arg(n.arg)
        tag = "" if n.tag is None else f" tag={n.tag!r}"
        lines.append(f"{pad}{number[n]} {n.op.value}:{_props(n)}{arg}{tag}")
        stack.extend((s, depth + 1) for s in reversed(n.src))
    if stack:
        lines.append("...")
    return "\n".join(lines)
