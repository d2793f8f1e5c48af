"""Packaging and the main job: one namespace installed, nothing generic, the tour runs."""

from __future__ import annotations

import fnmatch
import os
import re
import runpy
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import gputensor as gt

REPO = Path(__file__).resolve().parents[1]
# setup.py's derivation: the four source folders by installed name, and the package list.
SETUP = runpy.run_path(str(REPO / "setup.py"), run_name="setup_derivation")
ROOTS: dict[str, str] = SETUP["ROOTS"]
# Never shipped: caches and compiled files that may lie in the source tree.
NOT_SHIPPED = ("*.pyc", "*.pyo", "*.nbi", "*.nbc", "*.so", "*.o")


def _pyproject() -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    with open(REPO / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


def _source_packages() -> dict[str, Path]:
    """Every folder of the four roots that holds an ``__init__.py``, by its installed name."""
    found = {}
    for name, folder in ROOTS.items():
        base = REPO / folder
        for init in base.rglob("__init__.py"):
            rel = init.parent.relative_to(base)
            if "__pycache__" not in rel.parts:
                found[".".join((name, *rel.parts))] = init.parent
    return found


def _source_files() -> Iterator[tuple[str, Path]]:
    """(path inside the wheel, source path) of every file the distribution must ship."""
    for name, folder in ROOTS.items():
        base = REPO / folder
        for path in sorted(base.rglob("*")):
            rel = path.relative_to(base)
            if (path.is_file() and "__pycache__" not in rel.parts
                    and not any(part.startswith(".") for part in rel.parts)
                    and not any(fnmatch.fnmatch(path.name, pat) for pat in NOT_SHIPPED)):
                yield "/".join((*name.split("."), *rel.parts)), path


def _folder_of(package: str, package_dir: dict[str, str]) -> Path:
    """The folder setuptools builds ``package`` from: its nearest mapped parent's folder plus
    the remaining name parts (setuptools' build_py.get_package_dir)."""
    parts = package.split(".")
    for i in range(len(parts), 0, -1):
        prefix = ".".join(parts[:i])
        if prefix in package_dir:
            return REPO.joinpath(package_dir[prefix], *parts[i:])
    return REPO.joinpath(package_dir.get("", ""), *parts)


def _run(code: str, cwd: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_only_the_gputensor_namespace_is_installed(tmp_path) -> None:
    code = ("import importlib.util as u; import gputensor.storage, gputensor.kernels, "
            "gputensor.autograd; print([u.find_spec(n) is None for n in "
            "('storage', 'kernels', 'autograd')])")
    result = _run(code, str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[True, True, True]"


def test_import_compiles_no_kernel(tmp_path) -> None:
    # Numba dispatchers compile on first call; after import none has any compiled signature.
    code = ("import gc, numba, gputensor; "
            "from numba.core.registry import CPUDispatcher; "
            "print(sum(len(o.overloads) for o in gc.get_objects() "
            "if isinstance(o, CPUDispatcher)))")
    result = _run(code, str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0"


def test_tour_runs(tmp_path) -> None:
    result = subprocess.run([sys.executable, "-m", "gputensor", "tour"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    cuda = gt.cuda.is_available()  # the tour runs on CUDA when there is one (emulated in CI)
    for needle in ("backend CPU", f"cuda available: {cuda}",
                   f"x.type() = gputensor.{'cuda.' if cuda else ''}FloatTensor"):
        assert needle in result.stdout


def test_main_job_trains_and_checkpoints(tmp_path) -> None:
    """The README's main job, as a user runs it (one epoch here to keep the suite short)."""
    result = subprocess.run([sys.executable, "-m", "gputensor.demo", "--epochs", "1"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert "test accuracy" in result.stdout and (tmp_path / "digits_cnn.pt").exists()
    assert "epoch 1/1" in result.stderr  # the progress bar


def test_cli_dispatches_commands(tmp_path) -> None:
    result = subprocess.run([sys.executable, "-m", "gputensor", "demo", "--help"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0 and "--resume" in result.stdout


def test_new_factories_follow_self() -> None:
    x = gt.ones(2, dtype=gt.float64)
    assert x.new_zeros(2, 3).dtype is gt.float64 and x.new_zeros(2, 3).shape == (2, 3)
    assert x.new_full((2,), 7).tolist() == [7.0, 7.0]
    assert x.new_tensor([1, 2]).dtype is gt.float64
    assert x.new_ones(1, dtype=gt.int32).dtype is gt.int32


# ---- the distribution: packages, package data, the wheel --------------------------------------
def test_setup_derives_every_package_folder() -> None:
    """setup.py's package list is every folder with an __init__.py, each built from that very
    folder by setuptools' nearest-mapped-parent rule."""
    derived = list(SETUP["packages"]())
    found = _source_packages()
    assert len(found) >= 20 and "gputensor._ops" in found
    assert len(set(derived)) == len(derived), "duplicate packages"
    assert sorted(derived) == sorted(found)
    wrong = {name: str(_folder_of(name, ROOTS)) for name, folder in found.items()
             if _folder_of(name, ROOTS) != folder}
    assert wrong == {}, "package_dir maps these packages to the wrong folders"
    assert "packages" not in _pyproject()["tool"]["setuptools"], "one source of the list"


def test_package_data_covers_every_data_file() -> None:
    """Each non-Python file is matched by a package-data pattern of its nearest package."""
    setup = _pyproject()["tool"]["setuptools"]
    package_data = setup["package-data"]
    folders = {folder: name for name, folder in _source_packages().items()}
    unmatched = []
    for _, path in _source_files():
        if path.suffix == ".py":
            continue
        owner = next(p for p in path.parents if p in folders)
        rel = path.relative_to(owner).as_posix()
        if not any(fnmatch.fnmatch(rel, pat) for pat in package_data.get(folders[owner], ())):
            unmatched.append(str(path.relative_to(REPO)))
    assert unmatched == [], "data files no [tool.setuptools.package-data] pattern ships"


def _requirement(text: str) -> tuple[str, set[str], str]:
    """(normalised name, extras, version specifier) of a requirement string."""
    m = re.fullmatch(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?\s*([^;]*?)\s*", text)
    assert m, f"unparsed requirement {text!r}"
    name = re.sub(r"[-_.]+", "-", m.group(1)).lower()
    return name, {e.strip() for e in (m.group(2) or "").split(",") if e.strip()}, m.group(3)


def _cuda_wheels(reqs: list[str]) -> dict[str, tuple[int, str]]:
    """{"nvrtc"/"runtime": (CUDA major, specifier)} of the NVIDIA wheels in ``reqs``. CUDA 12
    names them nvidia-cuda-<c>-cu12; CUDA 13 nvidia-cuda-<c> at version 13.*."""
    wheels = {}
    for name, _, spec in map(_requirement, reqs):
        m = re.fullmatch(r"nvidia-cuda-(nvrtc|runtime)(?:-cu(\d+))?", name)
        if not m:
            continue
        pinned = re.match(r"==\s*(\d+)\.", spec)
        assert pinned, f"{name}{spec}: pin the CUDA major (==MAJOR.*)"
        if m.group(2) is not None:
            assert int(m.group(2)) == int(pinned.group(1)), f"{name}{spec}: two CUDA majors"
        wheels[m.group(1)] = (int(pinned.group(1)), spec)
    return wheels


@pytest.mark.parametrize("major", [12, 13])
def test_cuda_extra_brings_cupy_nvrtc_and_headers(major: int) -> None:
    """cudaNN works on a machine with only a driver: CuPy with its CUDA libraries ([ctk], CuPy
    >= 14), and NVRTC plus the CUDA headers (nvidia-cuda-runtime holds cuda_fp16.h) that
    kernels/cuda/nvrtc.py compiles with, all of CUDA ``major``."""
    reqs = _pyproject()["project"]["optional-dependencies"][f"cuda{major}"]
    cupy = [r for r in map(_requirement, reqs) if r[0].startswith("cupy")]
    assert [name for name, _, _ in cupy] == [f"cupy-cuda{major}x"]
    _, extras, spec = cupy[0]
    assert "ctk" in extras
    floor = re.search(r">=\s*(\d+)", spec)
    assert floor and int(floor.group(1)) >= 14, "CuPy's [ctk] extra starts with CuPy 14"
    wheels = _cuda_wheels(reqs)
    assert set(wheels) == {"nvrtc", "runtime"}
    assert wheels["nvrtc"] == wheels["runtime"] and wheels["nvrtc"][0] == major


@pytest.mark.parametrize(("extra", "major"), [("nvrtc", 12), ("nvrtc13", 13)])
def test_nvrtc_extra_brings_compiler_and_headers_of_one_minor(extra: str, major: int) -> None:
    reqs = _pyproject()["project"]["optional-dependencies"][extra]
    wheels = _cuda_wheels(reqs)
    assert set(wheels) == {"nvrtc", "runtime"}
    assert wheels["nvrtc"] == wheels["runtime"] and wheels["nvrtc"][0] == major
    assert re.fullmatch(rf"=={major}\.\d+\.\*", wheels["nvrtc"][1]), "pin one CUDA minor"


def test_wheel_ships_everything_and_runs_outside_the_checkout(tmp_path) -> None:
    """``pip wheel .`` then ``pip install --target``: the wheel holds every package and data
    file, and the installed copy (not the editable checkout) imports and computes."""
    src, dist, site, cwd = (tmp_path / d for d in ("src", "dist", "site", "cwd"))
    # Build from a copy: an in-tree build would write build/ and *.egg-info into the checkout.
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(REPO / name, src / name)
    for folder in ROOTS.values():
        shutil.copytree(REPO / folder, src / folder,
                        ignore=shutil.ignore_patterns("__pycache__", *NOT_SHIPPED))
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    env.pop("PYTHONPATH", None)
    pip = [sys.executable, "-m", "pip"]
    built = subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                            "-w", str(dist), str(src)], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = dist.glob("gputensor-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    inits = {"/".join(p.split(".")) + "/__init__.py" for p in _source_packages()}
    expected = inits | {name for name, _ in _source_files()}
    assert any(n.endswith(".cu") for n in expected) and any(n.endswith(".cuh") for n in expected)
    assert "gputensor/kernels/cuda/emulator/include/cuda_fp16.h" in expected
    assert sorted(expected - names) == [], "files missing from the wheel"

    installed = subprocess.run([*pip, "install", "--no-deps", "--no-index", "--target",
                                str(site), str(wheel)], cwd=tmp_path, env=env,
                               capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    # PYTHONPATH puts the target ahead of site-packages, and the editable install's finder sits
    # after the path finder on sys.meta_path, so the installed copy wins; -s drops user site.
    cwd.mkdir()
    code = ("import sys, gputensor as gt; x = gt.ones(3); print((x + x).sum().item()); "
            "images, labels = gt.datasets.digits('train'); print(len(labels) > 0); "
            "print(*sorted({m.__file__ for n, m in list(sys.modules.items()) "
            "if n.split('.')[0] == 'gputensor' and getattr(m, '__file__', None)}), sep='\\n')")
    ran = subprocess.run([sys.executable, "-s", "-c", code], cwd=cwd,
                         env={**env, "PYTHONPATH": str(site)}, capture_output=True, text=True,
                         timeout=300)
    assert ran.returncode == 0, ran.stderr
    total, has_data, *files = ran.stdout.split("\n")
    assert (total, has_data) == ("6.0", "True")
    files = [Path(f).resolve() for f in files if f]
    assert any(f.name == "__init__.py" and f.parent.name == "gputensor" for f in files)
    outside = [str(f) for f in files if not f.is_relative_to(site.resolve())]
    assert outside == [], "modules imported from outside the installed wheel"
