"""The schedule: Callify (one stateless function), the kernel split, and Rangeify (kernels to scalar code)."""
