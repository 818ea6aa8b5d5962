"""The wheel a site installs: one import namespace, and a base install that says what it lacks.

Built once per session from this checkout; the base install is a fresh virtual environment
with ``pip install cpsched`` and no extras, as docs/bridge.md tells a controller host.
Offline: the wheel is built without build isolation (from this environment's setuptools),
and the base install finds its requirements, and only those, already installed: linked in
from this environment.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from email.parser import Parser
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]


# What a build does not read; setuptools writes build/ into the tree it builds, so the
# wheel is built from a copy, not from this checkout.
_NOT_BUILT = shutil.ignore_patterns(
    ".git", ".venv", "build", "out", "tests", "bench", "docs", "*.egg-info", "__pycache__",
    ".hypothesis", ".pytest_cache", ".ruff_cache", ".mypy_cache", ".import_linter_cache",
)  # fmt: skip


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("source") / "cpsched"
    shutil.copytree(REPO, source, symlinks=True, ignore=_NOT_BUILT)
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "--no-index", "-w", str(out), str(source)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    (built,) = out.glob("cpsched-*.whl")
    return built


@pytest.fixture(scope="module")
def base_install(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment holding cpsched without extras; returns its bin directory."""
    env = tmp_path_factory.mktemp("base-venv")
    venv.create(env, with_pip=True)
    linked = _requirements_linked(wheel, tmp_path_factory.mktemp("base-requirements"))
    purelib = subprocess.run(
        [env / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(purelib) / "base-requirements.pth").write_text(f"{linked}\n")
    # --no-index: pip must find every requirement satisfied, as the links make it.
    subprocess.run(
        [env / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check",
         "--no-index", str(wheel)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return env / "bin"


def _requirements_linked(wheel: Path, folder: Path) -> Path:
    """``folder`` holding links to what this environment installed of the wheel's base
    requirements (no extra) and of theirs, so that a fresh environment can use them
    without the package index; nothing else (not OR-Tools, not FastAPI)."""
    with zipfile.ZipFile(wheel) as archive:
        (name,) = (n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        wanted = Parser().parsestr(archive.read(name).decode()).get_all("Requires-Dist", [])
    site = Path(sysconfig.get_path("purelib"))
    seen: set[str] = set()
    while wanted:
        requirement = Requirement(wanted.pop())
        if requirement.marker and not requirement.marker.evaluate({"extra": ""}):
            continue
        distribution = metadata.distribution(requirement.name)
        key = distribution.metadata["Name"].lower().replace("_", "-")
        if key in seen:
            continue
        seen.add(key)
        wanted.extend(distribution.requires or [])
        top = {
            f.parts[0] for f in distribution.files or [] if f.parts[0] not in ("..", "__pycache__")
        }
        for entry in top:
            target = folder / entry
            if not target.exists():
                target.symlink_to(site / entry)
    return folder


def test_the_wheel_installs_one_import_name(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    top_level = {
        name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")
    }
    assert top_level == {"cpsched"}
    # Every package folder of the repository is inside the namespace, with its data files.
    for package in ("core", "wire", "predictor", "service", "slurm_bridge", "replay", "migrations"):
        assert f"cpsched/{package}/__init__.py" in names
    assert "cpsched/migrations/script.py.mako" in names
    assert any(name.startswith("cpsched/slurm_bridge/kit/") for name in names)
    # The dashboard's templates and static files (no CDN: the wheel carries them all).
    for asset in ("templates/base.html", "templates/queue.html", "static/ui.css", "static/ui.js"):
        assert f"cpsched/service/ui/{asset}" in names


def test_base_install_cpsched_names_the_missing_extra(base_install: Path) -> None:
    done = subprocess.run(
        [base_install / "cpsched", "replay", "--help"], capture_output=True, text=True
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "pip install 'cpsched[service]'" in lines[0]
    assert "Traceback" not in done.stdout + done.stderr


def test_base_install_bridge_works(base_install: Path) -> None:
    done = subprocess.run(
        [base_install / "cpsched-bridge", "--help"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "run" in done.stdout
