"""Round 17 (tester A): a cache folder whose names are too long is the variable's, not a path passed."""

import os
from unittest import mock

from tests.shared import run_cli


def test_a_cache_folder_too_long_a_name_names_the_variable_to_set(tmp_path):
    """Was "Fix: pass a shorter path", though nothing was passed: the name came from $BYOC_WORKBENCH_CACHE."""
    long = tmp_path / ("x" * 300)
    with mock.patch.dict(os.environ, {"BYOC_WORKBENCH_CACHE": str(long)}):
        ran = run_cli(["prefetch", "--list"], tmp_path, text=True, capture_output=True)
    assert ran.returncode == 2, ran.stderr
    assert ran.stderr.splitlines() == [
        f"error: {str(long)[:60]}... is too long a name for this system, made in $BYOC_WORKBENCH_CACHE. Fix: set "
        "BYOC_WORKBENCH_CACHE to a folder with a shorter path (or unset it: ~/.cache/byoc-workbench)."
    ]
