"""Build the native extensions `merkle._crc` (scalar API, no numpy) and `merkle._native` (numpy
API) from csrc/ and the Cython layer.

Every kernel file gets only its own ISA flags (chosen by file name), never -march=native or a
global ISA flag, so one wheel runs on any CPU of its architecture and picks kernels at run time.

Environment switches (read at build time):
  CRCMERKLE_SANITIZE=1      build with AddressSanitizer + UndefinedBehaviorSanitizer
                            (run Python with LD_PRELOAD=$(gcc -print-file-name=libasan.so))
  CRCMERKLE_DEBUG=1         -O0 -g, asserts on
  CRCMERKLE_COVERAGE=1      gcov instrumentation of the C core
  CRCMERKLE_DISABLE_ISA=a,b leave kernel files out (sse42, pclmul, avx2, avx512, arm64)
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
CSRC = "csrc"

# Kernel file suffix -> (compile flags, macro telling the dispatcher the kernel is built).
X86_KERNELS = {
    "sse42": ["-msse4.2"],
    "pclmul": ["-msse4.2", "-mpclmul"],
    "avx2": ["-msse4.2", "-mpclmul", "-mavx2", "-mvpclmulqdq"],
    "avx512": ["-msse4.2", "-mpclmul", "-mavx512f", "-mavx512vl", "-mavx512bw", "-mvpclmulqdq"],
}
ARM64_KERNELS = {"arm64": ["-march=armv8-a+crc+crypto"]}


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def _machine() -> str:
    machine = platform.machine().lower()
    if machine in {"x86_64", "amd64"}:
        return "x86_64"
    if machine in {"aarch64", "arm64"}:
        return "aarch64"
    return machine


def _compiler_accepts(flags: list[str]) -> bool:
    """Whether the C compiler accepts these flags (an old compiler may lack -mvpclmulqdq)."""
    cc = os.environ.get("CC", "cc").split()
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "probe.c"
        src.write_text("int main(void) { return 0; }\n")
        result = subprocess.run(
            [*cc, *flags, "-c", str(src), "-o", str(Path(tmp) / "probe.o")],
            capture_output=True,
        )
    return result.returncode == 0


def _kernel_flags() -> tuple[dict[str, list[str]], list[tuple[str, str]]]:
    """ISA flags per kernel-file suffix for this machine, and the CRCM_HAVE_* macros."""
    disabled = {s.strip() for s in os.environ.get("CRCMERKLE_DISABLE_ISA", "").split(",") if s}
    candidates = {"x86_64": X86_KERNELS, "aarch64": ARM64_KERNELS}.get(_machine(), {})
    chosen: dict[str, list[str]] = {}
    for suffix, flags in candidates.items():
        if suffix in disabled or not (ROOT / CSRC / f"crc_{suffix}.c").exists():
            continue
        if suffix in ("avx512", "avx2") and "pclmul" not in chosen:
            continue  # the AVX-512 and AVX2 backends borrow the PCLMUL multiply
        if _compiler_accepts(flags):
            chosen[suffix] = flags
        else:
            print(f"crcmerkle: compiler rejects {flags}; leaving the {suffix} kernel out")
    macros = [(f"CRCM_HAVE_{suffix.upper()}", "1") for suffix in chosen]
    return chosen, macros


KERNEL_FLAGS, KERNEL_MACROS = _kernel_flags()
ALL_KERNEL_SUFFIXES = set(X86_KERNELS) | set(ARM64_KERNELS)


def _c_sources() -> list[str]:
    sources = []
    for path in sorted((ROOT / CSRC).glob("*.c")):
        stem = path.stem
        suffix = stem.rsplit("_", 1)[-1]
        if suffix in ALL_KERNEL_SUFFIXES and suffix not in KERNEL_FLAGS:
            continue
        if stem.startswith("cpu_") and suffix not in KERNEL_FLAGS:
            continue  # per-architecture CPU detection, e.g. cpu_arm64.c
        sources.append(f"{CSRC}/{path.name}")
    return sources


def _build_flags() -> tuple[list[str], list[str]]:
    compile_args = ["-std=c11", "-Wall", "-Wextra", "-Wno-unused-function"]
    link_args: list[str] = []
    if _flag("CRCMERKLE_DEBUG"):
        compile_args += ["-O0", "-g", "-UNDEBUG"]
    else:
        compile_args += ["-O3"]
    if _flag("CRCMERKLE_SANITIZE"):
        san = [
            "-fsanitize=address,undefined",
            "-fno-sanitize-recover=undefined",
            "-fno-omit-frame-pointer",
            "-g",
        ]
        compile_args += san
        link_args += san
    if _flag("CRCMERKLE_COVERAGE"):
        compile_args += ["--coverage"]
        link_args += ["--coverage"]
    return compile_args, link_args


class PerFileFlagsBuildExt(build_ext):
    """Adds each kernel file's ISA flags to that file's compile command only, and compiles an
    extension's source files side by side on the machine's cores (the Cython module, the
    largest, beside the kernels: CI builds the extension about ten times). The two extensions
    are still built one after the other: they share the C core's object files."""

    def build_extensions(self) -> None:
        original = self.compiler._compile

        def _compile(obj, src, ext, cc_args, extra_postargs, pp_opts):  # type: ignore[no-untyped-def]
            suffix = Path(src).stem.rsplit("_", 1)[-1]
            extra = list(extra_postargs or [])
            if (
                Path(src).parent.name == CSRC
                and suffix in KERNEL_FLAGS
                and not Path(src).stem.startswith("cpu_")
            ):
                extra += KERNEL_FLAGS[suffix]
            if src.endswith(".c") and Path(src).parent.name != CSRC:
                # Cython output: C11 warnings about Cython's own code are noise.
                extra = [a for a in extra if not a.startswith("-W")]
            return original(obj, src, ext, cc_args, extra, pp_opts)

        self.compiler._compile = _compile
        self.compiler.compile = _parallel_compile(self.compiler)  # type: ignore[method-assign]
        super().build_extensions()


def _parallel_compile(compiler):  # type: ignore[no-untyped-def]
    """CCompiler.compile with its loop over the objects run by a pool of threads (each `_compile`
    is a gcc process; distutils' own loop waits for each in turn)."""
    from concurrent.futures import ThreadPoolExecutor

    def compile(
        sources,
        output_dir=None,
        macros=None,
        include_dirs=None,
        debug=False,  # type: ignore[no-untyped-def]
        extra_preargs=None,
        extra_postargs=None,
        depends=None,
    ):
        macros, objects, extra_postargs, pp_opts, build = compiler._setup_compile(
            output_dir, macros, include_dirs, sources, depends, extra_postargs
        )
        cc_args = compiler._get_cc_args(pp_opts, debug, extra_preargs)

        def one(obj):  # type: ignore[no-untyped-def]
            src, ext = build[obj]
            compiler._compile(obj, src, ext, cc_args, extra_postargs, pp_opts)

        # the largest file (the Cython module) first, so that it does not start last
        todo = sorted(build, key=lambda o: -os.path.getsize(build[o][0]))
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            list(pool.map(one, todo))
        return objects

    return compile


compile_args, link_args = _build_flags()

# C files only merkle._native uses (the numpy API); merkle._crc leaves them out
_NATIVE_ONLY = ("/ozone_tree.c", "/bookkeeper.c")

# Module state (per-interpreter globals) is what isolated sub-interpreters need, and they exist
# from CPython 3.12 on; it costs a lookup per Python constant used in a call (about 10 ns each
# on a Zen 4), so older Pythons get the plain build. Heap types (type specs) cost nothing.
_MODULE_STATE = [("CYTHON_USE_MODULE_STATE", "1")] if sys.version_info >= (3, 12) else []
extensions = [
    # The scalar API without numpy, importable in isolated sub-interpreters (PEP 684): module
    # state on 3.12+, multi-phase init and heap types (CYTHON_USE_MODULE_STATE,
    # CYTHON_USE_TYPE_SPECS: static types would be shared between interpreters) with the own_gil
    # directive in the file.
    # It links its own copy of the C core (no Ozone code); _native adopts its backend slot.
    Extension(
        "merkle._crc",
        sources=["merkle/_crc.pyx", *[s for s in _c_sources() if not s.endswith(_NATIVE_ONLY)]],
        depends=["merkle/_crcfast.h", "merkle/_common.pxi"],
        include_dirs=[CSRC],
        define_macros=[*KERNEL_MACROS, *_MODULE_STATE, ("CYTHON_USE_TYPE_SPECS", "1")],
        extra_compile_args=compile_args,
        extra_link_args=link_args,
    ),
    Extension(
        "merkle._native",
        sources=["merkle/_native.pyx", *_c_sources()],
        include_dirs=[CSRC, numpy.get_include()],
        define_macros=[*KERNEL_MACROS, ("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=compile_args,
        extra_link_args=link_args,
    ),
]

setup(
    ext_modules=cythonize(
        extensions,
        compiler_directives={"language_level": "3", "embedsignature": True},
        quiet=True,
        nthreads=min(2, os.cpu_count() or 1),
    ),
    cmdclass={"build_ext": PerFileFlagsBuildExt},
)

if __name__ == "__main__" and "-v" in sys.argv:
    print("kernels:", KERNEL_FLAGS)
