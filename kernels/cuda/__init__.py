"""CuPy/CUDA kernels: `<op>.py` wrappers and `<op>.cu` sources, registered as backend "cuda"."""
