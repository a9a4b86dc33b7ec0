"""torch's intra-op thread count, set for a block and restored after it: one setting for every model that runs small
matrices on a shared CPU (channel T's DocNADE, channel S's encoder, the tests and benchmarks that time them)."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run with n intra-op threads: these models' matrices are small, and a second thread on a busy 2-core machine spends
    more time waiting than computing (a DocNADE epoch took 17 times longer than on one thread)."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
