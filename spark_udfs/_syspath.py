"""Keep an unbuilt source checkout in the current directory from shadowing the installed package.

`python -m MODULE` puts the current directory first on sys.path. Spark starts its Python
workers that way (`python -m pyspark.daemon`) in the driver's directory, so a job started from
the root of a crcmerkle clone would import the clone's `merkle/` folder, whose native extension
was never built there, instead of the installed package. This module imports nothing of
crcmerkle, so it can run from either copy.
"""

from __future__ import annotations

import glob
import os
import sys

__all__ = ["is_unbuilt_checkout", "prefer_installed_packages"]

_OUR_PACKAGES = ("merkle", "spark_udfs")


def is_unbuilt_checkout(directory: str) -> bool:
    """True when `directory` holds a crcmerkle source tree (`merkle/__init__.py`) whose native
    extensions have not both been built in place (`merkle/_crc*` and `merkle/_native*`, `.so`
    or `.pyd`): a checkout built before `_crc` existed cannot be imported either."""
    package = os.path.join(directory, "merkle")
    if not os.path.isfile(os.path.join(package, "__init__.py")):
        return False
    return not all(
        glob.glob(os.path.join(package, f"{ext}*.so"))
        or glob.glob(os.path.join(package, f"{ext}*.pyd"))
        for ext in ("_crc", "_native")
    )


def prefer_installed_packages() -> bool:
    """Drop the current directory from the front of sys.path when it is an unbuilt checkout,
    and forget any of our modules already imported from it, so the next import finds the
    installed copy. Returns True when it changed sys.path. An editable install is untouched:
    its checkout holds the built extension."""
    if not sys.path:
        return False
    first = os.path.abspath(sys.path[0] or os.curdir)
    if first != os.getcwd() or not is_unbuilt_checkout(first):
        return False
    del sys.path[0]
    for name in list(sys.modules):
        if name.split(".")[0] in _OUR_PACKAGES:
            module = sys.modules[name]
            if os.path.abspath(getattr(module, "__file__", "") or "").startswith(first + os.sep):
                del sys.modules[name]
    return True
