"""An ordinary user for the isolation tests, and ablate installed for it the way a user installs it.

As root, :func:`make_user` creates a throwaway account (``useradd``) and commands run as it through
``setpriv``; as an ordinary user the tests run as that user. :func:`user_venv` is a venv of the system
Python (``/usr/bin/python3``) with ablate installed non-editable (``pip install <checkout>``): its
dependencies come from the running venv (or one cached under ``.cache/user-venv``, built once per machine and
dependency list), linked in through a ``.pth`` file, so each test session installs only ablate itself.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SYSTEM_PYTHON = Path("/usr/bin/python3")


@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gid: int

    def argv(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run as this user (as is when the tests already run as it)."""
        if os.geteuid() == self.uid:
            return list(argv)
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups", "--", *argv]

    def own(self, path: Path) -> None:
        """Give ``path`` (a tree the test made as root) to this user."""
        if os.geteuid() != self.uid:
            subprocess.run(["chown", "-R", f"{self.uid}:{self.gid}", str(path)], check=True)


@contextmanager
def make_user() -> Iterator[User | None]:
    """An unprivileged account: a fresh one (removed afterwards) as root, the current one otherwise; None
    where none can be had (root without ``useradd``/``setpriv``)."""
    if os.geteuid() != 0:
        yield User(os.environ.get("USER", "me"), os.geteuid(), os.getegid())
        return
    if not (shutil.which("useradd") and shutil.which("setpriv")):
        yield None
        return
    name = f"ablt{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "-M", "-N", "-d", "/nonexistent", "-s", "/bin/bash", name], check=True)
    try:
        import pwd

        pw = pwd.getpwnam(name)
        yield User(name, pw.pw_uid, pw.pw_gid)
    finally:
        subprocess.run(["userdel", name], check=False, capture_output=True)


def world_readable_dir(prefix: str) -> Path:
    """A fresh folder outside ``/tmp`` that any user can enter (pytest's own are private to root)."""
    base = Path(tempfile.mkdtemp(prefix=prefix, dir="/var/tmp"))
    base.chmod(0o755)
    return base


def _deps_venv() -> Path:
    """A venv holding ablate's dependencies for the system Python: the running one (``make test``'s
    ``.venv``) when it is a venv of the same Python version, whose wheels serve the system Python as they
    are (its own ``.pth`` files, the editable ablate's among them, are not read through the link); else one
    cached under ``.cache/user-venv``."""
    system = subprocess.run(
        [str(SYSTEM_PYTHON), "-c", "import sys; print(*sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    if sys.prefix != sys.base_prefix and [int(v) for v in system] == list(sys.version_info[:2]):
        return Path(sys.prefix)
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    deps = sorted(project["dependencies"])
    key = hashlib.sha256(repr((deps, os.path.realpath(SYSTEM_PYTHON))).encode()).hexdigest()[:12]
    root = REPO_ROOT / ".cache" / "user-venv"
    root.mkdir(parents=True, exist_ok=True)
    venv = root / key
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (venv / ".complete").is_file():
            if venv.exists():
                shutil.rmtree(venv)
            subprocess.run([str(SYSTEM_PYTHON), "-m", "venv", str(venv)], check=True)
            pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
            subprocess.run([*pip, *deps], check=True, capture_output=True)
            (venv / ".complete").write_text("ok\n")
    return venv


def _site_packages(venv: Path) -> Path:
    (found,) = (venv / "lib").glob("python3*/site-packages")
    return found


def user_venv(dest: Path) -> Path:
    """A venv of the system Python at ``dest`` with ablate installed non-editable; its ``bin`` folder."""
    deps = _deps_venv()
    subprocess.run([str(SYSTEM_PYTHON), "-m", "venv", "--without-pip", str(dest)], check=True)
    (_site_packages(dest) / "ablate-test-deps.pth").write_text(f"{_site_packages(deps)}\n")
    pip = [str(deps / "bin" / "python"), "-m", "pip", "--python", str(dest / "bin" / "python")]
    proc = subprocess.run(
        [*pip, "install", "-q", "--no-deps", str(REPO_ROOT)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        proc.check_returncode()
    installed = subprocess.run(
        [str(dest / "bin" / "python"), "-c", "import ablate; print(ablate.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd="/",
    ).stdout.strip()
    assert installed.startswith(str(dest)), f"ablate imported from {installed}, not the venv"
    return dest / "bin"
