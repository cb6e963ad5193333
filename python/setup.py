# The picomq_connect package, its `agora` alias, and _picomq_abi, the sink ABI's plane
# normalisation compiled from picomq/sink_abi.h. Built by `python -m build` (scripts/release.sh
# builds the sdist and the wheel from a staged copy: the headers and VERSION are put beside this
# file there, so the sdist stands alone); `pip install ./python` from a checkout finds them in
# ../include and ../CMakeLists.txt.
import os
import re

from setuptools import Extension, setup

here = os.path.dirname(os.path.abspath(__file__))


def headers_dir():
    for candidate in (os.path.join(here, "include"), os.path.join(here, "..", "include")):
        if os.path.exists(os.path.join(candidate, "picomq", "sink_abi.h")):
            return candidate
    raise SystemExit("picomq_connect: picomq/sink_abi.h not found in ./include or ../include")


def version():
    # One version for the project: project(... VERSION x.y.z) in the top CMakeLists.txt.
    staged = os.path.join(here, "VERSION")
    if os.path.exists(staged):
        return open(staged).read().strip()
    text = open(os.path.join(here, "..", "CMakeLists.txt")).read()
    return re.search(r"project\(\s*picomq_connect\s+VERSION\s+([0-9.]+)", text).group(1)


setup(
    version=version(),
    ext_modules=[
        Extension("_picomq_abi", sources=["src/_picomq_abi.c"], include_dirs=[headers_dir()]),
    ],
)
