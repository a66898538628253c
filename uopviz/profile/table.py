"""A profile as a text table: what `print(profile)` and `uopviz profile` show."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from uopviz.profile.record import Profile

_HEAD = f"{'launch':>10s} {'share':>6s} {'runs':>5s} {'kernel':>10s} {'GFLOP/s':>8s} {'GB/s':>7s} {'roof':>5s}  where"


def render(p: Profile, top: int) -> str:
    """The totals and each device's roofs, then the `top` Tensor lines by time (the Tensor op, and whether these
    are its gradient's kernels, in brackets), each with its `top`
    kernels (one row per kernel: its launches together) and what the rest of them took. `launch` is the launches'
    wall time (what the step paid), `kernel` the kernels' own as the device measures it (what rates are over)."""
    lines = p.by_line()
    roofs = ", ".join(f"{d} {r.gflops:.1f} GFLOP/s, {r.gbs:.1f} GB/s" for d, r in p.roofs.items())
    out = [f"profile: {len(p.runs)} launches of {len(p.by_kernel())} kernels, {_ms(p.kernel_s)} in launches "
           f"({_ms(p.device_s)} in kernels as the devices time them), {_ms(p.wall_s)} wall",
           f"roofs: {roofs or 'none'}",
           _HEAD]
    for line in lines[:top]:
        made = f" [{line['op']}{', backward' if line['backward'] else ''}]" if line["op"] else ""
        out.append(f"{_row(line)} {'':>5s}  {_where(line['line'])}{made}")
        out += [f"{_row(k)} {k['roof']:5.0%}      {k['kernel']} ({k['device']}, {k['bound']})"
                for k in line["kernels"][:top]]
        out += _rest(line["kernels"][top:], "kernels of this line", "    ")
    out += _rest(lines[top:], "lines", "")
    return "\n".join(out)


def _row(g: dict[str, Any]) -> str:
    return (f"{_ms(g['time_s']):>10s} {g['share']:6.1%} {g['launches']:5d} {_ms(g['device_s']):>10s} "
            f"{g['gflops']:8.2f} {g['gbs']:7.2f}")


def _rest(groups: list[dict[str, Any]], what: str, indent: str) -> list[str]:
    if not groups:
        return []
    t, share = sum(g["time_s"] for g in groups), sum(g["share"] for g in groups)
    return [f"{_ms(t):>10s} {share:6.1%} {sum(g['launches'] for g in groups):5d} {'':>10s} {'':>8s} {'':>7s} "
            f"{'':>5s}  {indent}(and {len(groups)} more {what})"]


def _where(line: dict[str, Any] | None) -> str:
    if line is None:
        return "(no line of user code)"
    return f"{line['file']}:{line['line']} in {line['function']}: {line['code']}"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms"
