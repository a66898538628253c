"""The nodes of one program's graph. A call of a user function (`Function(body, *args)`) belongs to its caller's
graph by its arguments only: its body is a program of its own, scheduled apart and once per signature, so the
schedule's passes never walk into it (a caller's pass that did would redo that work on every call)."""

from __future__ import annotations

from uopviz.uop.ops import Ops, UOp


def sources(u: UOp) -> tuple[UOp, ...]:
    """The sources of u that belong to u's program: a called Function's arguments, not its body."""
    return u.src[1:] if u.op is Ops.FUNCTION else u.src


def program_order(root: UOp) -> list[UOp]:
    """root's program, sources first, not looking into called Functions' bodies."""
    seen, out, stack = {root}, [], [(root, iter(sources(root)))]
    while stack:
        node, it = stack[-1]
        for s in it:
            if s not in seen:
                seen.add(s)
                stack.append((s, iter(sources(s))))
                break
        else:
            stack.pop()
            out.append(node)
    return out


def stored(fn: UOp, order: list[UOp], values: set[UOp]) -> UOp:
    """Function fn (its body's program_order given) with each of values made Contiguous, so the kernel split stores
    it by a kernel of its own; fn itself when values is empty."""
    if not values:
        return fn
    body = fn.src[0]
    new: dict[UOp, UOp] = {}
    for u in order:
        new[u] = u.replace(src=tuple(new.get(s, s) for s in u.src))
        if u in values:
            new[u] = UOp(Ops.CONTIGUOUS, (new[u],))
    return fn.replace(src=(new[body], *fn.src[1:]))
