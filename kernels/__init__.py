"""Fast kernels, installed as `tinyformer.kernels`: one folder per backend, one file per op.

A kernel file registers the same primitive names as its op's NumPy reference, with
`tinyformer.registry.kernel`; the registry finds it without any list to edit.
"""
