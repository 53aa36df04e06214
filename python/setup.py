# SPDX-License-Identifier: MIT
"""Builds keel._keel against libkeel.

Where libkeel comes from:
  KEEL_BUILD_DIR=/path/to/build   an in-tree build (configure + make); the
                                  headers come from its source tree, and the
                                  extension finds build/.libs/libkeel.so by rpath
  otherwise                       pkg-config keel (an installed libkeel)
"""
import os
import re
import shlex
import subprocess

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = [os.path.join("src", f) for f in (
    "module.c", "errors.c", "device.c", "stream.c", "graph.c", "buffer.c",
    "array.c", "dlpack.c", "ops.c", "kernel.c", "bench.c")]


def in_tree(build):
    build = os.path.abspath(build)
    src = os.environ.get("KEEL_SOURCE_DIR")
    if not src:
        # configure records the source tree in the build's Makefile.
        try:
            with open(os.path.join(build, "Makefile")) as f:
                m = re.search(r"^abs_top_srcdir = (.*)$", f.read(), re.M)
            src = m.group(1).strip() if m else os.path.dirname(HERE)
        except OSError:
            raise SystemExit(f"KEEL_BUILD_DIR={build} is no configured Keel build (no Makefile)")
    libs = os.path.join(build, ".libs")
    if not os.path.exists(os.path.join(libs, "libkeel.so")):
        raise SystemExit(f"KEEL_BUILD_DIR={build}: no .libs/libkeel.so (run make there first)")
    return dict(include_dirs=[os.path.join(src, "include")], library_dirs=[libs],
                runtime_library_dirs=[libs], libraries=["keel"])


def installed():
    try:
        cflags = subprocess.check_output(["pkg-config", "--cflags", "keel"], text=True)
        libs = subprocess.check_output(["pkg-config", "--libs", "keel"], text=True)
        libdir = subprocess.check_output(["pkg-config", "--variable=libdir", "keel"], text=True).strip()
    except (OSError, subprocess.CalledProcessError):
        raise SystemExit("libkeel not found: install Keel (pkg-config keel), or set KEEL_BUILD_DIR to a build tree")
    inc = [f[2:] for f in shlex.split(cflags) if f.startswith("-I")]
    libdirs = [f[2:] for f in shlex.split(libs) if f.startswith("-L")]
    names = [f[2:] for f in shlex.split(libs) if f.startswith("-l")]
    return dict(include_dirs=inc, library_dirs=libdirs, runtime_library_dirs=[libdir] if libdir else [],
                libraries=names)


build_dir = os.environ.get("KEEL_BUILD_DIR")
where = in_tree(build_dir) if build_dir else installed()

setup(ext_modules=[Extension(
    "keel._keel", SOURCES,
    extra_compile_args=["-std=gnu11", "-O2", "-Wall", "-Wextra", "-Wno-missing-field-initializers",
                        "-Wno-cast-function-type"],
    **where)])
