"""`uopviz profile [--device D] [--top N] [--json FILE] script.py [ARGS...]`: run a script (with its own arguments)
and profile every kernel launch it makes (uopviz.profile): each launch's time, share, GFLOP/s, GB/s and place under
the device's measured roofs, grouped by the line of the script that ran it.

Exit codes: 0 profiled; 1 the script failed, ran no kernel, or the JSON file cannot be written; 2 bad usage (no such
script, unknown device).
"""

from __future__ import annotations

import argparse

from uopviz.cli.script import ProgramError, UsageError, fail, positive, run_script
from uopviz.runtime import device as devices


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `profile` on the `uopviz` command line."""
    p = subparsers.add_parser("profile", help="run a script and profile every kernel it runs, by line",
                              description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("script", metavar="SCRIPT", help="a .py script, run as `python SCRIPT ARGS...` would run it")
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS",
                   help="the script's own arguments, after SCRIPT (uopviz profile --top 5 model.py --steps 3)")
    p.add_argument("--device", default=None, help=devices.device_help())
    p.add_argument("--top", type=positive, default=10, metavar="N",
                   help="lines of the script, and kernels of each, shown (default: 10)")
    p.add_argument("--json", metavar="FILE", default=None, help="also write the profile's document to FILE")
    p.set_defaults(fn=cmd_profile)


def cmd_profile(args: argparse.Namespace) -> int:
    from uopviz.profile import profile
    from uopviz.runtime.device import DeviceError, UnknownDeviceError
    try:
        device = devices.canonical(args.device)
        with profile() as p:
            run_script(args.script, device, args.args)
        if not p.runs:
            raise ProgramError(f"{args.script} ran no kernel: there is nothing to profile")
        if args.json:
            p.save(args.json)
    except (UsageError, UnknownDeviceError) as e:
        return fail(e, 2)
    except (ProgramError, DeviceError, OSError) as e:
        return fail(e, 1)
    print(p.table(args.top))
    return 0

