"""Numba CPU kernels: `<op>.py` files registering `@kernel(name, backend="numba", ...)`."""
