"""Runtimes: the device registry (device.py), buffer storage (buffer.py) and one module per device."""
