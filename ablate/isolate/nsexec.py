"""Enter a private mount namespace, mount a session's copy-on-write view, then exec the session's command.

As root a mount namespace only; as an ordinary user inside a user namespace of the caller's own (uid and
gid mapped to themselves). ARGV is normally ``bwrap …`` (:mod:`ablate.isolate.fence`): the mounts are locked.

Run as a file (``python -I -S .../nsexec.py [--net SOCKET TOKEN] [--seccomp FILE] SPEC -- ARGV...``),
standard library only (one interpreter start, ~20 ms); ``--net``/``--seccomp`` seal the session
(:mod:`ablate.isolate.seal`). SPEC ``-`` mounts nothing (``links``), else it is ``{"mounts": [{"target",
"lower", "upper", "work"}, ...], "cwd"}``; every source folder is opened first and named as
``/proc/self/fd/N``, so a private ``/tmp`` mounted first hides nothing a later mount needs. ``--hold`` and
``--join``: :func:`hold`, :func:`join`. Exit 125: setup failed (the message says which mount).
"""

from __future__ import annotations

import ctypes
import json
import os
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
SETUP_FAILED = 125
#: Where the fenced command finds its stream to the forwarder, and bwrap its seccomp filter.
NET_FD = 3
SECCOMP_FD = 4
#: The session's ``RLIMIT_NPROC`` (:mod:`ablate.isolate.limits`), set once the view's namespaces exist.
NPROC_VAR = "ABLATE_NPROC"
#: Credentials a sealed session holds only a placeholder of (docs/ARCHITECTURE.md#secrets): the real value
#: goes to the forwarder, which puts it back into the request headers.
SWAPPED = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")


def placeholder(token: str, name: str) -> str:
    """What a sealed session sees in ``name`` instead of the real value, for the ticket ``token``."""
    import hashlib

    return "sk-ablate-session-" + hashlib.sha256(f"{name}:{token}".encode()).hexdigest()[:24]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def own_user_namespace(libc: ctypes.CDLL) -> None:
    """As an ordinary user: a new user namespace with the caller's uid and gid mapped to themselves (the
    process keeps its identity and gains, inside, the right to mount), and a mount namespace it owns."""
    uid, gid = os.geteuid(), os.getegid()
    _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare(CLONE_NEWUSER | CLONE_NEWNS)")
    for name, text in (
        ("setgroups", "deny"),
        ("uid_map", f"{uid} {uid} 1\n"),
        ("gid_map", f"{gid} {gid} 1\n"),
    ):
        with open(f"/proc/self/{name}", "w", encoding="ascii") as fh:
            fh.write(text)


def enter(mounts: list[dict[str, object]]) -> None:
    """Unshare the mount namespace (and a user namespace, as an ordinary user), then mount ``mounts``."""
    libc = _libc()
    if os.geteuid() == 0:
        _check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    else:
        own_user_namespace(libc)
    _check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
    fds: dict[str, int] = {}

    def fd(path: str) -> str:
        if path not in fds:
            fds[path] = os.open(path, os.O_PATH | os.O_DIRECTORY)
        return f"/proc/self/fd/{fds[path]}"

    prepared = []
    for m in mounts:
        lower = [str(p) for p in m["lower"]]  # type: ignore[attr-defined]
        opts = "lowerdir=" + ":".join(fd(p) for p in lower)
        if m.get("upper"):
            opts += f",upperdir={fd(str(m['upper']))},workdir={fd(str(m['work']))}"
        if os.geteuid() != 0:
            opts += ",userxattr"  # opaque folders as user.overlay.* xattrs: trusted.* needs root
        prepared.append((str(m["target"]), opts))
    for (target, opts), m in zip(prepared, mounts, strict=True):
        _mount_overlay(libc, target, opts, [str(p) for p in m["lower"]])  # type: ignore[attr-defined]
    for n in fds.values():
        os.close(n)


#: In a user namespace the kernel refuses a lower folder with a mount below it (locked there, it cannot be
#: cloned: EINVAL), as while another process has something mounted under ``/tmp`` for a moment; retried.
LOCKED_RETRIES = 40


def _mount_overlay(libc: ctypes.CDLL, target: str, opts: str, lower: list[str]) -> None:
    import errno
    import time

    for attempt in range(LOCKED_RETRIES + 1):
        if libc.mount(b"overlay", target.encode(), b"overlay", 0, opts.encode()) == 0:
            return
        err = ctypes.get_errno()
        if err != errno.EINVAL or os.geteuid() == 0 or attempt == LOCKED_RETRIES:
            break
        time.sleep(0.1)
    below = [p for low in lower for p in _mounts_under(low) if p.rstrip("/") != low.rstrip("/")]
    why = f" (mounted below a lower folder: {', '.join(below[:5])})" if below and err == errno.EINVAL else ""
    raise OSError(err, f"overlay on {target}: {os.strerror(err)}{why}")


def _mounts_under(root: str) -> list[str]:
    """:func:`ablate.core.mounts.mounts_under`, loaded from its file: run as a file, this module has no
    ``ablate`` package on its path (and imports nothing of it otherwise)."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "core", "mounts.py")
    spec = importlib.util.spec_from_file_location("_ablate_core_mounts", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found: list[str] = module.mounts_under(root)
    return found


def mount_overlay(target: str, lower: list[str], upper: str, work: str) -> None:
    """Mount an overlay at ``target`` in *this* process's mount namespace (as root, a view's working tree
    between sessions: :meth:`ablate.isolate.namespace.NamespaceEnvironments.checkout`)."""
    opts = f"lowerdir={':'.join(lower)},upperdir={upper},workdir={work}"
    _check(_libc().mount(b"overlay", target.encode(), b"overlay", 0, opts.encode()), f"overlay on {target}")


def hold(spec_path: str) -> int:
    """``--hold SPEC``: mount the view, say ``ready`` on stdout, keep it until stdin closes."""
    with open(spec_path, encoding="utf-8") as fh:
        spec = json.load(fh)
    try:
        enter(spec["mounts"])
    except OSError as exc:
        sys.stderr.write(f"ablate nsexec: {exc}\n")
        return SETUP_FAILED
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    sys.stdin.read()
    return 0


def join(pid: int, cwd: str) -> None:
    """``--join PID DIR -- ARGV``: enter the holder ``pid``'s mount (and user) namespace and change into
    ``DIR`` as that view has it: git run through ``/proc/<pid>/root`` would resolve the host's path."""
    libc = _libc()
    kinds = [("mnt", CLONE_NEWNS)]
    if os.stat(f"/proc/{pid}/ns/user").st_ino != os.stat("/proc/self/ns/user").st_ino:
        kinds.insert(0, ("user", CLONE_NEWUSER))  # a root holder's is ablate's own (none to enter)
    fds = [os.open(f"/proc/{pid}/ns/{name}", os.O_RDONLY) for name, _ in kinds]
    try:
        for n, (name, flag) in zip(fds, kinds, strict=True):
            _check(libc.setns(n, flag), f"setns({name} namespace of {pid})")
    finally:
        for n in fds:
            os.close(n)
    os.chdir(cwd)


def sealed(net: tuple[str, str] | None, seccomp: str | None) -> None:
    """``--net SOCKET TOKEN``: connect to ablate's forwarder, present the session's one-time token with the
    real value of each :data:`SWAPPED` variable (hex), put its placeholder in the environment the fence gets,
    and leave the connected stream at fd :data:`NET_FD` for the relay inside the fence; ``--seccomp FILE``:
    the fence's filter at fd :data:`SECCOMP_FD` (``bwrap --seccomp 4``). Both before any mount: the
    forwarder's folder may lie under a path the view covers."""
    import socket

    if net is not None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(30)
        sock.connect(net[0])
        upstream = os.environ.get("ANTHROPIC_BASE_URL", "")
        keys = [name for name in SWAPPED if os.environ.get(name)]
        fields = "".join(f" {name}={os.environ[name].encode().hex()}" for name in keys)
        sock.sendall(f"{net[1]} {upstream}{fields}\n".encode())
        said = sock.recv(4096).decode("utf-8", "replace").strip()
        if said != "ok":
            why = said.removeprefix("no: ") or "the ticket is spent or unknown"
            raise OSError(f"the forwarder at {net[0]} refused the session: {why}")
        os.environ.update({name: placeholder(net[1], name) for name in keys})
        sock.settimeout(None)
        _place(sock.detach(), NET_FD)
    if seccomp is not None:
        _place(os.open(seccomp, os.O_RDONLY), SECCOMP_FD)


def _place(fd: int, target: int) -> None:
    if fd != target:
        os.dup2(fd, target)  # inheritable
        os.close(fd)
    else:
        os.set_inheritable(fd, True)


def _options(args: list[str]) -> tuple[tuple[str, str] | None, str | None, list[str]]:
    net, seccomp = None, None
    while args and args[0] in ("--net", "--seccomp"):
        if args[0] == "--net" and len(args) >= 3:
            net, args = (args[1], args[2]), args[3:]
        elif args[0] == "--seccomp" and len(args) >= 2:
            seccomp, args = args[1], args[2:]
        else:
            break
    return net, seccomp, args


def main(args: list[str]) -> int:
    if len(args) == 2 and args[0] == "--hold":
        return hold(args[1])
    if len(args) >= 5 and args[0] == "--join" and args[3] == "--":
        try:
            join(int(args[1]), args[2])
        except (OSError, ValueError) as exc:
            sys.stderr.write(f"ablate nsexec: {exc}\n")
            return SETUP_FAILED
        return _exec(args[4:])
    net, seccomp, args = _options(args)
    if len(args) < 3 or args[1] != "--":
        sys.stderr.write(
            "usage: nsexec.py [--net SOCKET TOKEN] [--seccomp FILE] SPEC.json|- -- ARGV... "
            "| nsexec.py --hold SPEC.json | nsexec.py --join PID DIR -- ARGV...\n"
        )
        return SETUP_FAILED
    try:
        sealed(net, seccomp)
        if args[0] != "-":  # "-": no view of its own (the links backend), only the seal
            with open(args[0], encoding="utf-8") as fh:
                spec = json.load(fh)
            enter(spec["mounts"])
            os.chdir(spec["cwd"])
    except OSError as exc:
        sys.stderr.write(f"ablate nsexec: {exc}\n")
        return SETUP_FAILED
    nproc = os.environ.pop(NPROC_VAR, "")
    if nproc.isdigit():  # set inside the view's user namespace: only the session's own tasks count
        import resource

        resource.setrlimit(resource.RLIMIT_NPROC, (int(nproc), int(nproc)))
    return _exec(args[2:])


def _exec(argv: list[str]) -> int:
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        sys.stderr.write(f"ablate nsexec: cannot run {argv[0]}: {exc}\n")
        return 127
    return 0  # pragma: no cover - execvp does not return


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
