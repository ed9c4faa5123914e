"""Build the Cython extensions: every .pyx under src/spacy_structpref/ becomes
one module, compiled with numpy headers and optimisation flags. (The src/
layout keeps a checkout's uncompiled sources from shadowing the installed
package when commands run from the project root, as `spacy project run` does.)"""
import sys
from pathlib import Path

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

ROOT = Path(__file__).parent
SRC = ROOT / "src"
# -fno-math-errno: sqrt may then compile to one instruction and vectorise (results unchanged: nothing reads errno)
COMPILE_ARGS = ["-O3", "-fno-strict-aliasing", "-fno-math-errno"] if sys.platform != "win32" else ["/O2"]


def find_extensions():
    extensions = []
    for pyx in sorted((SRC / "spacy_structpref").rglob("*.pyx")):
        rel = pyx.relative_to(SRC).with_suffix("")
        extensions.append(
            Extension(
                ".".join(rel.parts),
                [str(pyx.relative_to(ROOT))],
                include_dirs=[numpy.get_include()],
                extra_compile_args=COMPILE_ARGS,
                define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
            )
        )
    return extensions


setup(
    ext_modules=cythonize(
        find_extensions(),
        language_level=3,
        compiler_directives={
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
        },
    ),
)
