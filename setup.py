"""Build hook: compiles the native C stage kernels with cffi during ``pip install``.

Everything else lives in pyproject.toml; setuptools needs ``cffi_modules`` here.
"""
from setuptools import setup

setup(cffi_modules=["native/build_native.py:ffibuilder"])
