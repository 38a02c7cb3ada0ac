"""Out-of-memory back-off of scoring.batching.run_batches, by simulation: a fake batch function that fails above a
size, the way CUDA and the CPU allocator fail."""

import pytest
import torch

from biaslab.scoring import batching

CUDA_OOM = lambda: torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")   # noqa: E731
CPU_OOM = lambda: RuntimeError("[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate "  # noqa: E731
                               "memory: you tried to allocate 8589934592 bytes. Error code 12")
CPU_OOM_NEW = lambda: RuntimeError("DefaultCPUAllocator: not enough memory: you tried to allocate 8 GB")  # noqa: E731


class Fake:
    """Fails with ``error()`` when a batch holds more than ``limit`` tokens (``limit`` may change over time)."""

    def __init__(self, lengths, limit, error):
        self.lengths, self.limit, self.error = lengths, limit, error
        self.done, self.budgets, self.failures = [], [], 0

    def __call__(self, batch, budget):
        self.budgets.append(budget)
        if sum(self.lengths[i] for i in batch) > self.limit(len(self.budgets)):
            self.failures += 1
            raise self.error()
        self.done.extend(batch)


@pytest.mark.parametrize("error", [CUDA_OOM, CPU_OOM, CPU_OOM_NEW, MemoryError])
def test_every_kind_of_allocation_failure_backs_off(error):
    lengths = [10] * 16
    fake = Fake(lengths, lambda call: 40, error)
    batching.run_batches(lengths, 160, fake)
    assert sorted(fake.done) == list(range(16)) and fake.failures == 2     # 160 -> 80 -> 40
    assert max(fake.budgets[fake.failures:]) == 40


def test_the_budget_grows_back_after_a_passing_shortage():
    lengths = [10] * 400
    # memory is short for the first 3 calls only (another process held it), then plenty again
    fake = Fake(lengths, lambda call: 40 if call <= 3 else 10 ** 9, CUDA_OOM)
    final = batching.run_batches(lengths, 160, fake, grow_after=4)
    assert sorted(fake.done) == list(range(400))
    assert fake.budgets[:3] == [160, 80, 40]
    assert final == 160                                   # recovered, and never above where it started
    assert max(fake.budgets) == 160
    assert fake.budgets[2:11] == [40] * 4 + [80] * 4 + [160]   # doubled after each 4 successes, not at once


def test_a_persistent_limit_costs_few_retries():
    lengths = [10] * 2000
    fake = Fake(lengths, lambda call: 40, CPU_OOM)
    final = batching.run_batches(lengths, 160, fake, grow_after=2)
    assert sorted(fake.done) == list(range(2000)) and final == 40
    # each failed regrowth doubles the patience: about log2(500 batches) failures, not one per few batches
    assert 2 < fake.failures <= 2 + 9      # log2(1000 / 2) = 9


def test_packed_order_survives_back_off_and_growth():
    lengths = [3, 5, 2, 7, 1, 4] * 20
    order = sorted(range(len(lengths)), key=lambda i: (i % 6, i))
    seen = []

    def fn(batch, budget):
        if len(seen) < 30 and sum(lengths[i] for i in batch) > 12:
            raise CUDA_OOM()
        seen.extend(batch)

    batching.run_batches(lengths, 48, fn, order=order, grow_after=2)
    assert seen == order                                  # every item once, in the given order


def test_other_errors_and_tiny_budgets_are_raised():
    with pytest.raises(ValueError):
        batching.run_batches([10] * 4, 160, lambda b, n: (_ for _ in ()).throw(ValueError("not memory")))
    with pytest.raises(RuntimeError, match="allocate"):
        batching.run_batches([10] * 4, 160, Fake([10] * 4, lambda c: 0, CPU_OOM))
    assert not batching.is_oom(RuntimeError("shape mismatch"))
