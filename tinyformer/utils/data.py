"""`tinyformer.utils.data`: datasets, samplers and the `DataLoader`, as `torch.utils.data`.

A dataset is anything with `__getitem__(i)` and `__len__()` (a map-style dataset, as
PyTorch's), or an `IterableDataset` that yields samples. A sampler yields indices:
`SequentialSampler` 0, 1, ..., `RandomSampler` a permutation drawn from tinyformer's seeded
generator (or its own `generator=`); a `BatchSampler` groups them into lists of `batch_size`.
The `DataLoader` reads the samples of each batch and joins them with `collate_fn`,
`default_collate` by default: tensors, NumPy arrays and numbers are stacked into one tensor
with a new first axis, and tuples, lists and dicts are joined element by element, as PyTorch's.

What differs from PyTorch, and why:
- Batches are made in this process, whatever `num_workers` says (tinyformer's kernels use
  threads of their own, and worker processes would copy every batch between processes): a
  loader asked for workers warns once and gives the same batches as with `num_workers=0`.
- A seed gives other shuffles than PyTorch's (another random generator), the same ones on
  every run and every machine.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from tinyformer import random as _random
from tinyformer.ops import stack
from tinyformer.tensor import Tensor

__all__ = [
    "BatchSampler", "DataLoader", "Dataset", "IterableDataset", "RandomSampler", "Sampler",
    "SequentialSampler", "Subset", "SubsetRandomSampler", "TensorDataset", "default_collate",
    "random_split",
]  # fmt: skip


# -- datasets ----------------------------------------------------------------------------------


class Dataset:
    """A map-style dataset: subclasses define `__getitem__(index)` and `__len__()` (which the
    base class leaves undefined, as PyTorch's, so that `len()` of a stream is a TypeError)."""

    def __getitem__(self, index: int) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")


class IterableDataset(Dataset):
    """A dataset that yields its samples (a stream): subclasses define `__iter__()`."""

    def __iter__(self) -> Iterator[Any]:
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")


class TensorDataset(Dataset):
    """Sample i is `(t[i] for t in tensors)`: the tensors share their first axis."""

    def __init__(self, *tensors: Tensor) -> None:
        sizes = [t.shape[0] if getattr(t, "ndim", 0) else None for t in tensors]
        if not tensors or None in sizes or len(set(sizes)) != 1:
            shapes = [tuple(getattr(t, "shape", ())) for t in tensors]
            raise ValueError(
                f"TensorDataset: needs tensors of one length along their first axis, got shapes "
                f"{shapes}"
            )
        self.tensors = tensors

    def __getitem__(self, index: int) -> tuple[Tensor, ...]:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]


class Subset(Dataset):
    """The samples of `dataset` at `indices`, in that order."""

    def __init__(self, dataset: Any, indices: Sequence[int]) -> None:
        self.dataset, self.indices = dataset, indices

    def __getitem__(self, index: int) -> Any:
        if isinstance(index, list):
            return [self.dataset[self.indices[i]] for i in index]
        return self.dataset[self.indices[index]]

    def __len__(self) -> int:
        return len(self.indices)


def random_split(
    dataset: Any, lengths: Sequence[float], generator: _random.Generator | None = None
) -> list[Subset]:
    """`dataset` split at random into Subsets of `lengths` (counts that sum to its length, or
    fractions that sum to 1, as PyTorch's: the remainder of rounding goes one by one to the
    first parts)."""
    n = len(dataset)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        counts = [int(math.floor(n * f)) for f in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    if sum(lengths) != n:
        raise ValueError(
            f"random_split: the lengths {list(lengths)} sum to {sum(lengths)}, not to the "
            f"dataset's length {n}"
        )
    order = _random.numpy_generator(generator).permutation(n).tolist()
    ends = np.cumsum(lengths).tolist()
    return [Subset(dataset, order[end - k : end]) for k, end in zip(lengths, ends)]


# -- samplers ----------------------------------------------------------------------------------


class Sampler:
    """Yields the indices of the samples to read, in order."""

    def __iter__(self) -> Iterator[Any]:
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source: Any) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """A new random order of the indices at each pass (or, with `replacement`, `num_samples`
    indices drawn independently), from `generator` or tinyformer's seeded generator."""

    def __init__(
        self,
        data_source: Any,
        replacement: bool = False,
        num_samples: int | None = None,
        generator: _random.Generator | None = None,
    ) -> None:
        self.data_source, self.replacement, self.generator = data_source, replacement, generator
        self._num_samples = num_samples
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(
                f"RandomSampler: num_samples must be a positive integer, got {self.num_samples}"
            )
        _random.numpy_generator(generator)  # a wrong generator fails here, not at the first pass

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        # Drawn lazily, a chunk at a time: makemore's endless loader asks for 1e10 samples.
        rng = _random.numpy_generator(self.generator)
        n, left = len(self.data_source), self.num_samples
        while left > 0:
            if self.replacement:
                chunk = rng.integers(0, n, size=min(left, 1024))
            else:  # num_samples beyond n: whole permutations one after another, as PyTorch's
                chunk = rng.permutation(n)[:left]
            left -= len(chunk)
            yield from chunk.tolist()

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices, in a new random order at each pass."""

    def __init__(self, indices: Sequence[int], generator: _random.Generator | None = None) -> None:
        self.indices, self.generator = indices, generator

    def __iter__(self) -> Iterator[int]:
        order = _random.numpy_generator(self.generator).permutation(len(self.indices))
        return (self.indices[i] for i in order.tolist())

    def __len__(self) -> int:
        return len(self.indices)


class BatchSampler(Sampler):
    """The indices of `sampler` in lists of `batch_size` (the last one shorter, or dropped
    with `drop_last`)."""

    def __init__(self, sampler: Iterable[int], batch_size: int, drop_last: bool) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(
                f"BatchSampler: batch_size must be a positive integer, got {batch_size!r}"
            )
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self) -> Iterator[list[int]]:
        batch = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


# -- collation ---------------------------------------------------------------------------------


def default_collate(batch: Sequence[Any]) -> Any:
    """Join a list of samples into a batch, as PyTorch's `default_collate`: tensors and NumPy
    arrays are stacked along a new first axis; Python floats become a float64 tensor, ints an
    int64 one, bools a bool one; strings stay a list; a dict's values, a tuple's or list's
    elements (a list of the joined parts) and a named tuple's fields are joined one by one."""
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(list(batch), 0)
    if isinstance(elem, np.ndarray) or isinstance(elem, np.generic):
        if np.asarray(elem).dtype.kind not in "biuf":
            raise TypeError(
                f"default_collate: NumPy arrays of dtype {np.asarray(elem).dtype} cannot be a "
                "tensor; give arrays of numbers"
            )
        return Tensor(np.stack([np.asarray(b) for b in batch]))
    if isinstance(elem, bool):
        return Tensor(np.array(batch, dtype=np.bool_))
    if isinstance(elem, int):
        return Tensor(np.array(batch, dtype=np.int64))
    if isinstance(elem, float):
        return Tensor(np.array(batch, dtype=np.float64))
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, Mapping):
        return {key: default_collate([d[key] for d in batch]) for key in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # a named tuple
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(elem, Sequence):
        if len({len(b) for b in batch}) != 1:
            raise RuntimeError("default_collate: each element in list of batch should be of "
                               "equal size")  # fmt: skip
        return [default_collate(list(samples)) for samples in zip(*batch)]
    raise TypeError(
        "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
        f"found {type(elem)}"
    )


def _convert(sample: Any) -> Any:
    """A sample read without batching (`batch_size=None`): NumPy arrays become tensors."""
    if isinstance(sample, np.ndarray) and sample.dtype.kind in "biuf":
        return Tensor(sample)
    if isinstance(sample, Mapping):
        return {key: _convert(value) for key, value in sample.items()}
    if isinstance(sample, tuple) and hasattr(sample, "_fields"):
        return type(sample)(*(_convert(v) for v in sample))
    if isinstance(sample, (list, tuple)):  # a tuple becomes a list, as in PyTorch
        return [_convert(v) for v in sample]
    return sample


# -- the loader --------------------------------------------------------------------------------


class DataLoader:
    """Batches of `dataset`: `for x, y in DataLoader(ds, batch_size=32, shuffle=True)`.

    Args:
        dataset: a map-style dataset (`__getitem__`, `__len__`) or an IterableDataset.
        batch_size: samples per batch; None reads single samples, unbatched.
        shuffle: a new random order at each pass (a RandomSampler).
        sampler: the indices to read, in order (instead of shuffle).
        batch_sampler: lists of indices, one per batch (instead of batch_size, shuffle,
            sampler and drop_last).
        num_workers: accepted for PyTorch code; batches are made in this process (a warning
            says so when it is not 0). Negative is refused, as PyTorch refuses it.
        collate_fn: joins a list of samples into a batch (default_collate).
        drop_last: drop a last batch shorter than batch_size.
        generator: a tf.Generator for shuffling (tinyformer's global one when None).
        pin_memory, timeout, worker_init_fn, prefetch_factor, persistent_workers: accepted
            for PyTorch code; they have nothing to do without worker processes or a GPU copy.
    """

    def __init__(
        self,
        dataset: Any,
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler: Iterable[Any] | None = None,
        batch_sampler: Iterable[list[Any]] | None = None,
        num_workers: int = 0,
        collate_fn: Callable[[list[Any]], Any] | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable[[int], Any] | None = None,
        generator: _random.Generator | None = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
    ) -> None:
        if not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(
                f"DataLoader: num_workers option should be non-negative; got {num_workers!r}"
            )
        if num_workers:
            warnings.warn(
                f"DataLoader: num_workers={num_workers} runs as 0 here: tinyformer makes the "
                "batches in the training process (its kernels already use threads, and worker "
                "processes would copy every batch between processes); the batches are the same",
                UserWarning,
                stacklevel=2,
            )
        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, drop_last
        self.num_workers, self.pin_memory, self.generator = 0, pin_memory, generator
        self.collate_fn = collate_fn
        self._iterable = isinstance(dataset, IterableDataset) or not hasattr(dataset, "__len__")
        if self._iterable and (shuffle or sampler is not None or batch_sampler is not None):
            raise ValueError(
                "DataLoader: an IterableDataset yields its own order: shuffle, sampler and "
                "batch_sampler take a map-style dataset (one with __getitem__ and __len__)"
            )
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(
                    "DataLoader: batch_sampler option is mutually exclusive with batch_size, "
                    "shuffle, sampler, and drop_last"
                )
            self.batch_size, self.drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("DataLoader: batch_size=None option disables auto-batching and "
                             "is mutually exclusive with drop_last")  # fmt: skip
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle")
        if sampler is None and not self._iterable:
            sampler = (
                RandomSampler(dataset, generator=generator)
                if shuffle
                else SequentialSampler(dataset)
            )
        if batch_sampler is None and self.batch_size is not None and not self._iterable:
            batch_sampler = BatchSampler(sampler, self.batch_size, drop_last)
        self.sampler, self.batch_sampler = sampler, batch_sampler
        if collate_fn is None:
            self.collate_fn = default_collate if self._auto_batching else _convert

    @property
    def _auto_batching(self) -> bool:
        return self.batch_sampler is not None or (self._iterable and self.batch_size is not None)

    def __iter__(self) -> Iterator[Any]:
        if self._iterable:
            yield from self._iter_stream()
        elif self.batch_sampler is not None:
            for indices in self.batch_sampler:
                yield self.collate_fn([self.dataset[i] for i in indices])
        else:
            for index in self.sampler:
                yield self.collate_fn(self.dataset[index])

    def _iter_stream(self) -> Iterator[Any]:
        if self.batch_size is None:
            yield from (self.collate_fn(sample) for sample in self.dataset)
            return
        batch = []
        for sample in self.dataset:
            batch.append(sample)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def __len__(self) -> int:
        if self._iterable:
            n = len(self.dataset)  # a TypeError for a stream without a length, as PyTorch's
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        return len(self.sampler)
