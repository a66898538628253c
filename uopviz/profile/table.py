"""A profile as a text table: what `print(profile)` and `uopviz profile` show."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from uopviz.profile.record import Profile


def render(p: Profile, top: int) -> str:
    """The totals and each device's roofs, then the `top` lines of the user's code by time, each with its `top`
    kernels (one row per kernel: its launches together) and what the rest of them took."""
    kernels = p.by_kernel()
    head = [f"profile: {len(p.runs)} launches of {len(kernels)} kernels, {_ms(p.kernel_s)} in kernels, "
            f"{_ms(p.wall_s)} wall ({p.kernel_s / p.wall_s:.0%} in kernels)" if p.wall_s else "",
            "roofs: " + ", ".join(f"{d} {r.gflops:.1f} GFLOP/s, {r.gbs:.1f} GB/s" for d, r in p.roofs.items()),
            f"{'time':>10s} {'share':>6s} {'runs':>5s} {'GFLOP/s':>8s} {'GB/s':>7s} {'roof':>5s}  kernel"]
    out = [h for h in head if h]
    lines = p.by_line()
    for line in lines[:top]:
        out.append(f"{_ms(line['time_s']):>10s} {line['share']:6.1%} {line['launches']:5d} {line['gflops']:8.2f} "
                   f"{line['gbs']:7.2f} {'':>5s}  {_where(line['line'])}")
        out += [_kernel_row(k) for k in line["kernels"][:top]]
        out += _rest(line["kernels"][top:], "kernels of this line", "    ")
    out += _rest(lines[top:], "lines", "")
    return "\n".join(out)


def _kernel_row(k: dict[str, Any]) -> str:
    return (f"{_ms(k['time_s']):>10s} {k['share']:6.1%} {k['launches']:5d} {k['gflops']:8.2f} {k['gbs']:7.2f} "
            f"{k['roof']:5.0%}  {'':4s}{k['kernel']} ({k['device']}, {k['bound']})")


def _rest(groups: list[dict[str, Any]], what: str, indent: str) -> list[str]:
    if not groups:
        return []
    t, share = sum(g["time_s"] for g in groups), sum(g["share"] for g in groups)
    return [f"{_ms(t):>10s} {share:6.1%} {sum(g['launches'] for g in groups):5d} {'':>8s} {'':>7s} {'':>5s}  "
            f"{indent}(and {len(groups)} more {what})"]


def _where(line: dict[str, Any] | None) -> str:
    if line is None:
        return "(no line of user code)"
    return f"{line['file']}:{line['line']} in {line['function']}: {line['code']}"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms"
