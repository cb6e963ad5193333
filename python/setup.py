# pip install ./python (from the repository root): the picomq_connect package, its `agora` alias,
# and _picomq_abi, the sink ABI's plane normalisation compiled from include/picomq/sink_abi.h.
import os

from setuptools import Extension, setup

here = os.path.dirname(os.path.abspath(__file__))
include = os.path.join(here, "..", "include")

setup(
    ext_modules=[
        Extension("_picomq_abi", sources=["src/_picomq_abi.c"], include_dirs=[include]),
    ],
)
