"""PyTorch for the equality tests: the module, or why the test cannot run.

PyTorch is not a requirement of the site. ``.ci/run`` installs its CPU build
(hash-pinned, ``.ci/requirements-torch.txt``) and sets ``REQUIRE_TORCH=1``;
elsewhere a test that needs it is skipped with the reason in pytest's summary
(``-ra``).
"""

from __future__ import annotations

import os


def require_torch():
    """The ``torch`` module; else skip the test, or fail it with ``REQUIRE_TORCH=1`` (.ci/run sets it)."""
    import pytest

    try:
        import torch
    except ImportError as error:
        problem = (f"PyTorch is not installed ({error}; its CPU build: "
                   "pip install --require-hashes -r requirements.txt -r .ci/requirements-torch.txt)")
    else:
        return torch
    if os.environ.get("REQUIRE_TORCH") == "1":
        pytest.fail(f"REQUIRE_TORCH=1 but {problem}", pytrace=False)
    pytest.skip(f"PyTorch equality tests skipped: {problem}")
