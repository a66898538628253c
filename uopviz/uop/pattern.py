"""Pattern matching and graph rewriting: UPat, PatternMatcher and graph_rewrite to a fixpoint.

Every pass of the compiler is a `graph_rewrite` with a name. While a recorder is active (`uopviz.trace`),
each pass and each match is reported to it; with none active the only cost is one global read per pass.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import linecache
import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import CodeType
from typing import Any, Protocol

from uopviz.dtype import DType
from uopviz.uop.ops import Ops, UOp

_ANY: Any = object()


class UPat:
    """A pattern over UOps.

    op: an Ops or a set of them (None: any). dtype: a DType or set. arg: exact arg (default: any).
    src: None (any sources), a tuple (in order), a list (in any order: every permutation is tried), or a
    single UPat (every source matches it, any count). allow_any_len: the given sources match a prefix.
    name: bind the matched node; a name used twice must bind the same node.
    """

    __slots__ = ("allow_any_len", "arg", "dtype", "early", "name", "op", "src", "src_options")

    def __init__(self, op: Ops | Iterable[Ops] | None = None, dtype: DType | Iterable[DType] | None = None,
                 src: tuple[UPat, ...] | list[UPat] | UPat | None = None, arg: Any = _ANY, name: str | None = None,
                 allow_any_len: bool = False) -> None:
        self.op = None if op is None else frozenset((op,) if isinstance(op, Ops) else op)
        self.dtype = None if dtype is None else frozenset((dtype,) if isinstance(dtype, DType) else dtype)
        self.arg, self.name, self.allow_any_len, self.src = arg, name, allow_any_len, src
        if isinstance(src, list):
            self.src_options: list[tuple[UPat, ...]] | None = [tuple(p) for p in _unique_perms(src)]
        elif isinstance(src, tuple):
            self.src_options = [src]
        else:
            self.src_options = None
        # ops that must appear among the direct sources: a cheap set test rejects most nodes before matching
        first = self.src_options[0] if self.src_options else ()
        self.early = frozenset(next(iter(p.op)) for p in first if p.op is not None and len(p.op) == 1)

    # ---- shorthands used by rule sets ----
    @staticmethod
    def var(name: str | None = None, dtype: DType | Iterable[DType] | None = None) -> UPat:
        return UPat(dtype=dtype, name=name)

    @staticmethod
    def cvar(name: str | None = None, dtype: DType | Iterable[DType] | None = None) -> UPat:
        return UPat(Ops.CONST, dtype=dtype, name=name)

    @staticmethod
    def const(dtype: DType | Iterable[DType] | None, value: Any) -> UPat:
        """A Const with this value (compared with ==, so 1 matches 1.0 in a float dtype)."""
        return _ConstValue(dtype, value)

    def alu(self, op: Ops, *others: UPat, commutative: bool | None = None) -> UPat:
        from uopviz.uop.ops import GroupOp
        srcs = [self, *others]
        comm = op in GroupOp.Commutative if commutative is None else commutative
        return UPat(op, src=srcs if comm else tuple(srcs))

    __add__ = lambda self, x: self.alu(Ops.ADD, x)  # noqa: E731
    __mul__ = lambda self, x: self.alu(Ops.MUL, x)  # noqa: E731
    __floordiv__ = lambda self, x: self.alu(Ops.IDIV, x)  # noqa: E731
    __mod__ = lambda self, x: self.alu(Ops.MOD, x)  # noqa: E731
    __lt__ = lambda self, x: self.alu(Ops.CMPLT, x)  # noqa: E731

    def match(self, u: UOp, store: dict[str, UOp] | None = None) -> list[dict[str, UOp]]:
        """Every consistent set of name bindings under which this pattern matches u (empty list: no match)."""
        return self._match(u, {} if store is None else store)

    def _match(self, u: UOp, store: dict[str, UOp]) -> list[dict[str, UOp]]:
        if self.op is not None and u.op not in self.op:
            return []
        if self.early and not self.early.issubset([s.op for s in u.src]):
            return []
        if self.arg is not _ANY and u.arg != self.arg:
            return []
        if self.dtype is not None and u.dtype not in self.dtype:
            return []
        if not self._extra(u):
            return []
        if self.name is not None:
            bound = store.get(self.name)
            if bound is not None and bound is not u:
                return []
            store = {**store, self.name: u}
        if self.src is None:
            return [store]
        if self.src_options is not None:
            options = self.src_options
        else:  # src is one UPat, which every source must match
            assert isinstance(self.src, UPat)
            options = [(self.src,) * len(u.src)]
        out: list[dict[str, UOp]] = []
        for pats in options:
            if len(u.src) != len(pats) and not (self.allow_any_len and len(u.src) >= len(pats)):
                continue
            stores = [store]
            for p, s in zip(pats, u.src):
                stores = [n for st in stores for n in p._match(s, st)]
                if not stores:
                    break
            out.extend(stores)
        return out

    def _extra(self, u: UOp) -> bool:
        return True

    def __repr__(self) -> str:
        ops = "None" if self.op is None else "|".join(sorted(o.name for o in self.op))
        name = f", name={self.name!r}" if self.name else ""
        arg = "" if self.arg is _ANY else f", arg={self.arg!r}"
        return f"UPat({ops}{arg}{name})"


class _ConstValue(UPat):
    __slots__ = ("value",)

    def __init__(self, dtype: DType | Iterable[DType] | None, value: Any) -> None:
        super().__init__(Ops.CONST, dtype=dtype)
        self.value = value

    def _extra(self, u: UOp) -> bool:
        v = u.arg.value
        return v == self.value and isinstance(v, bool) == isinstance(self.value, bool)


def _unique_perms(src: Sequence[UPat]) -> list[tuple[UPat, ...]]:
    seen: list[tuple[UPat, ...]] = []
    for p in itertools.permutations(src):
        if not any(all(a is b for a, b in zip(p, q)) for q in seen):
            seen.append(p)
    return seen


@dataclass(eq=False)
class Rule:
    """One (pattern, function) pair, with where it was written so a trace can point at it."""

    pat: UPat
    fn: Callable[..., UOp | None]
    wants_ctx: bool
    file: str
    line: int
    _text: str | None = field(default=None, repr=False)

    @property
    def location(self) -> str:
        return f"{_relpath(self.file)}:{self.line}"

    @property
    def summary(self) -> str:
        """One line naming the rule: a lambda's own text (not the rest of its line), or a function's name."""
        code = getattr(self.fn, "__code__", None)
        if code is None or self.fn.__name__ != "<lambda>":
            return getattr(self.fn, "__qualname__", repr(self.fn))
        body = [(ln, c, ec) for ln, _, c, ec in code.co_positions() if ln is not None and c is not None and ec]
        line = linecache.getline(self.file, self.line).rstrip()
        if not line or not body:
            return line.strip() or repr(self.pat)
        first = min(body)
        start = line.rfind("lambda", 0, first[1] if first[0] == self.line else len(line))
        end = max(ec for ln, _, ec in body if ln == self.line) if all(ln == self.line for ln, _, _ in body) else None
        return line[max(start, 0):end].strip() + ("" if end is not None else " ...")

    @property
    def text(self) -> str:
        """The rule's source text (the lambda's line(s), or the function's def), read lazily."""
        if self._text is None:
            code = getattr(self.fn, "__code__", None)
            text = _source(code) if code is not None else None
            self._text = text or linecache.getline(self.file, self.line).strip() or repr(self.pat)
        return self._text


@functools.cache
def _source(code: CodeType) -> str | None:
    """A function's source text by its code object: the rules of matchers built again and again (one per kernel,
    closing over its target) share their code, and reading it anew tokenized the file each time (3 s of saving a
    GPT step's trace)."""
    try:
        return inspect.getsource(code).strip()
    except (OSError, TypeError):
        return None


def _relpath(path: str) -> str:
    """A path relative to the uopviz checkout when inside it, so traces do not leak absolute home paths."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap = os.path.abspath(path)
    return os.path.relpath(ap, root) if ap.startswith(root + os.sep) else path


class PatternMatcher:
    """An ordered rule list with dispatch by op. A rule returns a new UOp, or None to decline."""

    def __init__(self, rules: Sequence[tuple[UPat, Callable[..., UOp | None]] | Rule],
                 name: str | None = None) -> None:
        self.name = name
        self.rules: list[Rule] = [r if isinstance(r, Rule) else _make_rule(*r) for r in rules]
        self.pdict: dict[Ops, list[Rule]] = {}
        for op in Ops:
            lst = [r for r in self.rules if r.pat.op is None or op in r.pat.op]
            if lst:
                self.pdict[op] = lst

    def __add__(self, other: PatternMatcher) -> PatternMatcher:
        return PatternMatcher([*self.rules, *other.rules], name=self.name or other.name)

    def rewrite(self, u: UOp, ctx: Any = None) -> UOp | None:
        """The first rule's non-None result for u (a result equal to u counts as declining)."""
        return _Rewriter(self, ctx, self.name or "rewrite", None, 0).apply(u)


def _make_rule(pat: UPat, fn: Callable[..., UOp | None]) -> Rule:
    code = getattr(fn, "__code__", None)
    params = inspect.signature(fn).parameters
    wants_ctx = "ctx" in params
    if wants_ctx and next(iter(params)) != "ctx":
        raise TypeError(f"rule function {fn!r}: `ctx` must be its first parameter")
    return Rule(pat, fn, wants_ctx, code.co_filename if code else "?", code.co_firstlineno if code else 0)


class Recorder(Protocol):
    """What graph_rewrite reports to while tracing (implemented by uopviz.trace)."""

    def begin_pass(self, name: str, stage: str | None, root: UOp) -> None: ...
    def on_match(self, rule: Rule, matched: UOp, replacement: UOp, time_ns: int) -> None: ...
    def end_pass(self, output: UOp | None, error: BaseException | None) -> None: ...


_recorder: Recorder | None = None


def set_recorder(rec: Recorder | None) -> Recorder | None:
    """Install the active recorder (None: recording off); returns the previous one."""
    global _recorder
    prev, _recorder = _recorder, rec
    return prev


def current_recorder() -> Recorder | None:
    """The active recorder (None: recording off)."""
    return _recorder


class RewriteError(RuntimeError):
    """A pass did not reach a fixpoint: a rule set loops or keeps growing the graph."""


class _Rewriter:
    def __init__(self, pm: PatternMatcher, ctx: Any, name: str, rec: Recorder | None, max_chain: int,
                 sources: Callable[[UOp], tuple[UOp, ...]] | None = None) -> None:
        self.pm, self.ctx, self.name, self.rec, self.max_chain = pm, ctx, name, rec, max_chain
        self.sources = sources
        self.last: deque[Rule] = deque(maxlen=6)

    def apply(self, u: UOp) -> UOp | None:
        for rule in self.pm.pdict.get(u.op, ()):
            for b in rule.pat._match(u, {}):
                if self.rec is None:
                    ret = rule.fn(self.ctx, **b) if rule.wants_ctx else rule.fn(**b)
                else:
                    t0 = time.perf_counter_ns()
                    ret = rule.fn(self.ctx, **b) if rule.wants_ctx else rule.fn(**b)
                    dt = time.perf_counter_ns() - t0
                if ret is not None and ret is not u:
                    self.last.append(rule)
                    if self.rec is not None:
                        self.rec.on_match(rule, u, ret, dt)
                    return ret
        return None

    def fail(self, why: str) -> RewriteError:
        """The error naming the pass and the distinct rules among the last ones applied (oldest first)."""
        rules = "; ".join(f"{r.location} {r.summary}" for r in dict.fromkeys(self.last))
        return RewriteError(f"pass {self.name!r} did not reach a fixpoint: {why}. Last rules applied: {rules}")

    def run(self, root: UOp, bottom_up: bool, done: dict[UOp, UOp] | None = None) -> UOp:
        done = {} if done is None else done
        waiting: set[UOp] = set()
        # (node, state, replacement, chain length): state 0 = first visit, 1 = sources done, 2 = replacement done
        stack: list[tuple[UOp, int, UOp | None, int]] = [(root, 0, None, 0)]
        while stack:
            n, state, y, chain = stack.pop()
            if state == 0:
                if n in done:
                    continue
                if n in waiting:
                    raise self.fail(f"{n.op.value} is rewritten into a graph that contains it again")
                if chain > self.max_chain:
                    raise self.fail(f"a node was rewritten {self.max_chain} times in a row")
                waiting.add(n)
                if bottom_up and (y := self.apply(n)) is not None:
                    stack.append((n, 2, y, chain))
                    stack.append((y, 0, None, chain + 1))
                    continue
                stack.append((n, 1, None, chain))
                srcs = n.src if self.sources is None else self.sources(n)
                stack.extend((s, 0, None, 0) for s in reversed(srcs) if s not in done)
            elif state == 1:
                new_src = tuple(done[s] for s in n.src) if self.sources is None else \
                    tuple(done.get(s, s) for s in n.src)
                x = n if all(a is b for a, b in zip(new_src, n.src)) else n.replace(src=new_src)
                if x is not n and x in done:
                    done[n] = done[x]
                    waiting.discard(n)
                    continue
                y = None if bottom_up and x is n else self.apply(x)
                if y is None:
                    done[n] = done[x] = x
                    waiting.discard(n)
                else:
                    stack.append((n, 2, y, chain))
                    stack.append((y, 0, None, chain + 1))
            else:
                assert y is not None  # a state-2 entry carries the replacement it waited for
                done[n] = done[y]
                waiting.discard(n)
        return done[root]


def graph_rewrite(root: UOp, pm: PatternMatcher, ctx: Any = None, name: str | None = None, bottom_up: bool = False,
                  stage: str | None = None, max_chain: int = 1000,
                  sources: Callable[[UOp], tuple[UOp, ...]] | None = None, memo: dict[UOp, UOp] | None = None) -> UOp:
    """Rewrite the graph under root with pm until no rule matches anywhere (a fixpoint).

    Default order: a node's sources are rewritten before the node is matched, and a rule's result is itself
    rewritten. bottom_up=True matches each node *before* its sources (rules then see the original subtree).
    A rule set that loops, or keeps rewriting one node more than max_chain times, raises RewriteError naming
    the pass and the last rules applied. `sources(u)`, when given, names the sources of u to rewrite (default:
    all); the others are kept as they are, so a pass can leave a subgraph it has no business in unvisited.
    `memo`, when given, holds what each node was rewritten to and is kept between calls: many rewrites of graphs
    that share subgraphs (one per lane of a vector) visit each shared node once. Only for rules whose result
    depends on the node alone (no ctx, no `sources`), under one set of rules.
    """
    pass_name = name or pm.name or "rewrite"
    rec = _recorder
    rw = _Rewriter(pm, ctx, pass_name, rec, max_chain, sources)
    if rec is None:
        return rw.run(root, bottom_up, memo)
    rec.begin_pass(pass_name, stage, root)
    try:
        out = rw.run(root, bottom_up, memo)
    except BaseException as e:
        rec.end_pass(None, e)
        raise
    rec.end_pass(out, None)
    return out


def function_pass(fn: Callable[[UOp], UOp], root: UOp, name: str, stage: str | None = None,
                  origin: Callable[..., Any] | None = None) -> UOp:
    """Run a whole-graph transform that is an algorithm rather than a rule set (a kernel split, a linearizer).

    It is recorded like a rewrite pass, as one step that replaces the root, with `fn` as the rule, so a trace
    shows every stage of the pipeline by name whatever it is written as. `origin` is the function the trace
    should point at when fn is a small adapter around it.
    """
    rec = _recorder
    if rec is None:
        return fn(root)
    rec.begin_pass(name, stage, root)
    try:
        t0 = time.perf_counter_ns()
        out = fn(root)
        dt = time.perf_counter_ns() - t0
    except BaseException as e:
        rec.end_pass(None, e)
        raise
    if out is not root:
        rec.on_match(_make_rule(UPat(root.op), origin or fn), root, out, dt)
    rec.end_pass(out, None)
    return out


@contextmanager
def unrecorded() -> Iterator[None]:
    """Keep a trace being recorded free of the work inside the block (deciding opts, searching, lookups): it is
    not part of the lowering the trace shows."""
    prev = set_recorder(None)
    try:
        yield
    finally:
        set_recorder(prev)


def recording() -> bool:
    """Whether a recorder is active (callers may skip caches so that the work they cache gets recorded)."""
    return _recorder is not None
