"""What a tuning result is valid for: the target it was timed on and the complete cache key.

A time is only comparable with another taken on the same device, driver and compiler, and opts only mean the
same thing under the action space and uopviz version that produced them, so all of these are in the key: a
change to any one makes the database answer "not tuned" instead of returning stale opts.
"""

from __future__ import annotations

from dataclasses import dataclass

from uopviz.codegen.opt.actions import ACTION_SPACE_VERSION
from uopviz.trace.ids import node_id
from uopviz.uop.ops import Ops, UOp
from uopviz.version import __version__


@dataclass(frozen=True)
class TargetInfo:
    """A device as the tuning database tells devices apart ("" where a device has no such thing)."""

    device: str
    device_name: str = ""
    driver: str = ""
    compiler: str = ""
    compiler_version: str = ""


def describe_target(device: str | None = None) -> TargetInfo:
    """The target of a device name (None: the default device), asked of its runtime, which it starts.

    The compiler's flags are part of `compiler`: the CPU's `-march=native` changes what a kernel compiles to.
    """
    from uopviz.runtime.device import get, shard_free

    d = get(device).describe()
    compiler = " ".join(s for s in (d.get("compiler", ""), d.get("flags", "")) if s)
    return TargetInfo(shard_free(d["device"]), d.get("name", ""), d.get("driver", ""), compiler,
                      d.get("compiler_version", ""))


@dataclass(frozen=True)
class CacheKey:
    """Everything a search result depends on; `results` holds at most one row per key.

    kernel_hash: a canonical content hash of the kernel's AST (uopviz.trace.ids.node_id gives one), so the
    same kernel built in another process or from another program shares its result.
    action_space_version: the search's own version of its set of actions; bump it when the actions change.
    """

    kernel_hash: str
    device: str
    device_name: str
    driver: str
    compiler: str
    compiler_version: str
    action_space_version: int
    uopviz_version: str = __version__

    @classmethod
    def of(cls, kernel_hash: str, target: TargetInfo, action_space_version: int,
           uopviz_version: str = __version__) -> CacheKey:
        """The key for a kernel on a target (as describe_target gives it)."""
        return cls(kernel_hash, target.device, target.device_name, target.driver, target.compiler,
                   target.compiler_version, action_space_version, uopviz_version)

    @property
    def target(self) -> TargetInfo:
        return TargetInfo(self.device, self.device_name, self.driver, self.compiler, self.compiler_version)


def cache_key(ast: UOp, target: str | TargetInfo) -> CacheKey:
    """The tuning database's key for a kernel on a device (a name: its runtime is started to describe it) or on a
    target already described (a cluster's). The devices its Params name count without their index (`CPU:*`),
    like the target's, so that the kernel of one shard of a multi-device tensor, tuned once, serves every shard
    with the same shape."""
    info = target if isinstance(target, TargetInfo) else describe_target(target)
    return CacheKey.of(kernel_hash(ast), info, ACTION_SPACE_VERSION)


def kernel_hash(ast: UOp) -> str:
    """The key's hash of a kernel: its AST's, with the devices its Params name counted without their index."""
    return node_id(_shard_free(ast))


def _shard_free(ast: UOp) -> UOp:
    """ast with each Param's device spelled without its index."""
    from uopviz.runtime.device import shard_free

    params = {u: u.replace(arg=u.arg._replace(device=shard_free(u.arg.device))) for u in ast.toposort()
              if u.op is Ops.PARAM and isinstance(u.arg.device, str) and shard_free(u.arg.device) != u.arg.device}
    return ast.substitute(params) if params else ast
