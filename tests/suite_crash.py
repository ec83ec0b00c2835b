"""A worker function for the Dask crash test: the worker process dies the first time it meets one case.

Imported by Dask worker processes (by reference), so it lives in a module of
its own.  ``EXACTIDENT_TEST_CRASH_DIR`` (inherited from the test process)
holds the marker files that make the crash happen once.
"""

import os
from pathlib import Path

from exactident.suites.run import check_case_text


def crash_once(text: str, source: str) -> dict:
    marker = Path(os.environ["EXACTIDENT_TEST_CRASH_DIR"]) / "crashed"
    if source.endswith("-000.json") and "/generic" in "/" + source and not marker.exists():
        marker.write_text(source)
        os._exit(1)  # a hard crash: no exception, the worker process is gone
    return check_case_text(text, source)
