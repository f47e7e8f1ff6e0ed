"""Builds fuser: the C++ core and bindings through CMake (ninja), the Python package.

Install next to a torch wheel with `pip install --no-build-isolation -e .`: the build
needs the installed torch's headers and libraries, which an isolated build cannot see.
Set FUSER_BUILD_TESTS=1 to also build the GoogleTest programs (run by ctest).
"""

import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
BUILD_DIR = ROOT / "build" / "cmake"
PACKAGE_DIR = ROOT / "fuser"
# torch loads this on `import torch`; a top-level package so that loading it imports
# nothing of fuser (see fuser/autoload/__init__.py).
ENTRY_PACKAGE = "fuser_autoload"


def _cmake_args() -> list[str]:
    # An earlier install's entry point must not run while we build the next one.
    os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    import torch
    from torch.utils import cpp_extension

    build_tests = os.environ.get("FUSER_BUILD_TESTS", "0") == "1"
    return [
        f"-DTORCH_INCLUDE_DIRS={';'.join(cpp_extension.include_paths())}",
        f"-DTORCH_LIBRARY_DIR={cpp_extension.library_paths()[0]}",
        f"-DTORCH_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
        f"-DPYTHON_INCLUDE_DIR={sysconfig.get_paths()['include']}",
        f"-DPYTHON_EXT_SUFFIX={sysconfig.get_config_var('EXT_SUFFIX')}",
        f"-DFUSER_PACKAGE_DIR={PACKAGE_DIR}",
        f"-DFUSER_BUILD_TESTS={'ON' if build_tests else 'OFF'}",
        f"-DCMAKE_BUILD_TYPE={os.environ.get('FUSER_BUILD_TYPE', 'Release')}",
    ]


class CMakeBuild(build_ext):
    """Runs the CMake build, which writes the libraries into fuser/ directly."""

    def build_extension(self, ext: Extension) -> None:
        BUILD_DIR.mkdir(parents=True, exist_ok=True)
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        subprocess.check_call(["cmake", str(ROOT), *generator, *_cmake_args()], cwd=BUILD_DIR)
        jobs = str(os.cpu_count() or 2)
        subprocess.check_call(["cmake", "--build", ".", "--parallel", jobs], cwd=BUILD_DIR)
        # A regular (non-editable) install takes the libraries from build_lib.
        target_dir = Path(self.get_ext_fullpath(ext.name)).parent
        if target_dir.resolve() != PACKAGE_DIR.resolve():
            target_dir.mkdir(parents=True, exist_ok=True)
            for built in PACKAGE_DIR.glob("*.so"):
                shutil.copy2(built, target_dir / built.name)


setup(
    name="fuser",
    version="0.1.0",
    description="A TorchScript fusion pass that compiles elementwise groups for CPU and CUDA",
    packages=[
        *find_packages(include=["fuser", "fuser.*"], exclude=["fuser.autoload"]),
        ENTRY_PACKAGE,
    ],
    package_dir={ENTRY_PACKAGE: "fuser/autoload"},
    ext_modules=[Extension("fuser._C", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.10",
    install_requires=[],
    extras_require={"plot": ["matplotlib"], "models": ["torchvision", "timm"]},
    entry_points={
        "torch.backends": [f"fuser = {ENTRY_PACKAGE}:autoload"],
        "console_scripts": ["fuser-bench = fuser.bench.cli:main"],
    },
    zip_safe=False,
)
