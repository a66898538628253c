"""Kernel code generation: the per-kernel stages from optimization to rendered source."""
