"""Round 12's careless user (S12): ``subjects.load_model_file`` of no path is one line naming the argument, as its
siblings (``zoo_ref``, ``load``) are."""

import pytest
from messages import refused

from byoc_workbench import subjects


@pytest.mark.parametrize("path", [None, 5, b"model.py"])
def test_load_model_file_of_no_path_is_one_line_naming_the_argument(path):
    """S12: it was pathlib's TypeError ("argument should be a str or an os.PathLike object")."""
    line = refused(
        lambda: subjects.load_model_file(path), f"path must be a str or a pathlib.Path, got {type(path).__name__}"
    )
    assert "pass the path of a .py file that defines mod" in line
