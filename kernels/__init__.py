"""The kernel zoo (see zoo.py): `kernels.ZOO` maps names to shaped tensor programs."""

from uopviz.kernels.zoo import ZOO, Input, ZooKernel, get

__all__ = ["ZOO", "Input", "ZooKernel", "get"]
