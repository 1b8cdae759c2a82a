"""A5: softmax kernels in Numba (`kernels.py`) and in CUDA (`softmax.cu`, launched by
`cuda.py`), the checks and their drivers.

Imports none of its modules: importing `kernels.py` or `cuda.py` registers a kernel for the
whole process."""
