"""Packaging for tinyformer.

`kernels/` is a top-level folder of the repository but installs as `tinyformer.kernels`: PyPI
already has an unrelated distribution called `kernels`, so we never install a top-level package
of that name.
"""

from setuptools import find_packages, setup

KERNEL_PACKAGES = ["kernels", "kernels.numba", "kernels.cuda"]

setup(
    name="tinyformer",
    version="0.1.0",
    description="A NumPy deep-learning engine for teaching transformers, readable end to end.",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    # every folder of tinyformer/ with an __init__.py (tests/test_entry_points.py checks that
    # each folder of Python files has one), and kernels/ as tinyformer.kernels
    packages=[
        *find_packages(include=["tinyformer", "tinyformer.*"]),
        *[p.replace("kernels", "tinyformer.kernels", 1) for p in KERNEL_PACKAGES],
    ],
    package_dir={"tinyformer.kernels": "kernels"},
    package_data={
        "tinyformer.kernels.cuda": ["*.cu", "*.cuh", "*.h"],
        "tinyformer.course.assignments.a5": ["*.cu"],
    },
    install_requires=[
        "numpy>=2.0",
        # Numba is a core dependency: the hot paths run through it on every laptop,
        # and the registry still falls back to the NumPy references if it fails to import.
        "numba>=0.60",
        "tqdm>=4.60",
        "matplotlib>=3.7",
        # The vision commands' embedded default dataset is scikit-learn's bundled 8x8 digits.
        "scikit-learn>=1.3",
        # linear's Numba kernel calls BLAS through Numba's np.dot (which needs SciPy), and asks
        # threadpoolctl whether BLAS runs on one thread. Both come with scikit-learn too.
        "scipy>=1.10",
        "threadpoolctl>=3.1",
    ],
    extras_require={
        "dev": [
            "pytest>=7",
            # `make test` runs the tests in one process per core (-n auto --dist loadscope)
            "pytest-xdist>=3.2",
            "hypothesis>=6.80",
            "ruff>=0.5",
            "jupytext>=1.16",
            "nbmake>=1.5",
            "ipykernel>=6",
            # the docs: File.generated (1.6) for the tutorial pages, LaTeX -> MathML at build
            # time, and selenium to open the built site in headless Chromium
            "mkdocs>=1.6",
            "latex2mathml>=3.77",
            "selenium>=4.11",
            "einops>=0.7",
            # NVRTC compiles every CUDA kernel to a cubin in the tests, with no GPU or driver
            'nvidia-cuda-nvrtc>=13; platform_system == "Linux" and platform_machine == "x86_64"',
            # the distributed tests start 2 ranks with the MPI launcher of the mpich wheel
            "mpi4py>=4",
            'mpich>=4; platform_system != "Windows"',
        ],
        # data parallel training over MPI: mpi4py and an MPI that installs as a wheel
        "mpi": ["mpi4py>=4", 'mpich>=4; platform_system != "Windows"'],
        # a student's release: its notebooks are jupytext sources, opened in JupyterLab
        "course": ["jupytext>=1.16", "jupyterlab>=4", "ipykernel>=6"],
        # einops.rearrange/repeat/reduce on tinyformer tensors, and nn.Rearrange / nn.Reduce
        # (0.7 has the per-rank recipes the layers use)
        "einops": ["einops>=0.7"],
        # a slider over the steps of viz.BackwardStepper(...).widget() in JupyterLab
        "widgets": ["ipywidgets>=8"],
        # CuPy built for the machine's CUDA: `pip install -e ".[cuda13]"` (or cuda12)
        "cuda12": ["cupy-cuda12x>=13"],
        "cuda13": ["cupy-cuda13x>=14"],
    },
    entry_points={
        "console_scripts": ["tinyformer = tinyformer.cli:main"],
        "pytest11": ["tinyformer = tinyformer.testing.plugin"],
    },
)
