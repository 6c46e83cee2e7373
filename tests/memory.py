"""Memory a test held, given back to the system.

A worker process runs dozens of test modules, and the model modules load models of hundreds of
megabytes each. Kept by module-level caches and by the allocator after they were freed, they added
up to 14 GB in one worker, and the kernel killed it on a 23 GB machine, with the other worker and
the browser tests' notebooks beside it.
"""

import ctypes
import gc


def give_back() -> None:
    """Collect what no one holds, then hand the C heap's free pages back (glibc's malloc_trim)."""
    gc.collect()
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (AttributeError, OSError):  # another C library: it keeps them
        pass
