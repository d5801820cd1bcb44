"""A label matrix handed to child processes through shared memory instead of a pipe.

A document's child processes (:mod:`service.core.offload`) need the whole matrix: pickled, its
~58 MB at 1M items x 10 raters were copied into a pipe, out of it and into the child's memory,
once per child. :class:`SharedMatrix` writes the matrix once, in its compact types, into an
anonymous in-memory file; pickled for a child it is the file's descriptor (passed by the
forkserver like a pipe's), and the child maps the file read-only: no copy, however many
children read it. The file is freed when the parent closes it and the children end, so a
crashed process leaves nothing behind.
"""

from __future__ import annotations

import mmap
import os
import tempfile
from multiprocessing import reduction
from types import TracebackType
from typing import Any

import numpy as np

from planner.codes import code_type
from service.matrices.matrix import LabelMatrix, RaterColumn, rank_type

_ALIGN = 64


def _anonymous_file(size: int) -> int:
    """A descriptor of a ``size``-byte file living in memory only (a memfd; an unlinked temporary file elsewhere)."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("annoplan-matrix", os.MFD_CLOEXEC)
    else:
        fd, path = tempfile.mkstemp(prefix="annoplan-matrix-")
        os.unlink(path)
    os.ftruncate(fd, max(size, 1))
    return fd


class SharedMatrix:
    """``matrix`` (codes in :func:`~planner.codes.code_type`, arrival ranks in :func:`rank_type`) in shared
    memory, while open.

    Pickled for a child process, it arrives as a :class:`~service.matrices.matrix.LabelMatrix` over the
    shared, read-only arrays. Use it as a context manager around the children's lifetime.
    """

    def __init__(self, matrix: LabelMatrix):
        types: dict[str, np.dtype[Any]] = {
            "raw": code_type(matrix.n_labels),
            "order": np.dtype(rank_type(matrix.label_seq)),
            "item_ids": np.dtype(np.int64),
        }
        self._layout: list[tuple[str, str, tuple[int, ...], int]] = []
        size = 0
        for name, dtype in types.items():
            shape = getattr(matrix, name).shape
            self._layout.append((name, dtype.str, shape, size))
            size += -(-dtype.itemsize * int(np.prod(shape)) // _ALIGN) * _ALIGN
        self._size = size
        self._meta = (matrix.raters, matrix.n_labels, matrix.label_seq, matrix.criterion)
        self._fd = _anonymous_file(size)
        for name, stored, _, offset in self._layout:
            # values fit: the types were chosen so; the kept matrix is in them already (no conversion copy)
            array = np.ascontiguousarray(getattr(matrix, name).astype(stored, copy=False))
            data = array.reshape(-1).view(np.uint8).data
            while data:  # written into the file, not through a mapping: no page faults of a fresh map
                written = os.pwrite(self._fd, data, offset)
                data, offset = data[written:], offset + written

    def __enter__(self) -> SharedMatrix:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Release the parent's descriptor (children that mapped the file keep their mapping)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __reduce__(self) -> tuple[Any, ...]:
        if self._fd < 0:
            raise ValueError("a closed SharedMatrix cannot be sent to a process")
        return _mapped_matrix, (reduction.DupFd(self._fd), self._size, self._layout, self._meta)


def _mapped_matrix(
    handle: Any,
    size: int,
    layout: list[tuple[str, str, tuple[int, ...], int]],
    meta: tuple[list[RaterColumn], int, int, str],
) -> LabelMatrix:
    """The :class:`~service.matrices.matrix.LabelMatrix` over the shared file ``handle`` (in a child process)."""
    fd = handle.detach()
    try:
        memory = mmap.mmap(fd, max(size, 1), prot=mmap.PROT_READ)
    finally:
        os.close(fd)
    arrays = {
        name: np.ndarray(shape, dtype=dtype, buffer=memory, offset=offset) for name, dtype, shape, offset in layout
    }
    raters, n_labels, label_seq, criterion = meta
    return LabelMatrix(
        raw=arrays["raw"],
        item_ids=arrays["item_ids"],
        raters=raters,
        n_labels=n_labels,
        label_seq=label_seq,
        criterion=criterion,
        order=arrays["order"],
    )
