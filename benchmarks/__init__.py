"""tinyformer's benchmarks, all in this folder: `python -m benchmarks` (or `make bench`) prints
the engine, op, kernel and memory tables; the scripts beside it put tinyformer beside PyTorch
(`python benchmarks/gpt_vs_torch.py`, ...). The timing harness they share is
`tinyformer.bench`; the kernel cases shared with the tests are in `tinyformer.testing`."""
