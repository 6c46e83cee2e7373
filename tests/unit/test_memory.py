"""Memory a notebook gives back between models."""

import os
import sys

import pytest


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_release_memory_hands_freed_heap_back_to_the_system():
    """What notebook 06's chooser calls between picks: freed memory the C heap keeps (its top held by one
    live block, as a model's leftovers hold it) goes back, so a seat's resident memory falls."""
    from byoc_workbench import workflow

    def rss_mb() -> float:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    blocks = [bytearray(20_000) for _ in range(10_000)]  # about 200 MB in blocks glibc keeps on its heap
    last = blocks[-1]
    del blocks
    before = rss_mb()
    workflow.release_memory()
    assert before - rss_mb() > 100, "the freed 200 MB stayed resident"
    assert len(last) == 20_000
