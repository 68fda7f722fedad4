"""Many copies of the bundled reference server, each started in milliseconds: a fork server.

Theory of operation: a check run starts about a hundred server processes, and the reference server
spends most of its start-up importing (trio, msgspec, :mod:`mcpwire.server`). For that one server
the run starts a *zygote* once: ``python -m mcpwire.conformance.forkserver zygote MODULE SOCKET ...``
imports ``MODULE`` (and the modules it imports only once it runs, given after SOCKET) and listens
on a Unix socket. Each server process of the run is then a *shim*,
a standard-library Python script started with ``-I -S`` (a few milliseconds): it connects, hands
its stdin, stdout and stderr to the zygote (``SCM_RIGHTS``), and the zygote forks a child that
takes them as its own and runs ``MODULE`` as ``__main__``. The checker talks to the child through
those very pipes, so everything it reads and writes is the server's; the shim only stands for the
process:

- the child's exit status (or the signal that ended it) becomes the shim's, reported by the
  zygote when it reaps the child;
- SIGTERM, SIGINT and SIGHUP sent to the shim are passed on to the child; if the shim is killed
  (SIGKILL), the child sees the connection close and kills itself, so no child outlives its shim;
- the shim drops its own copies of the pipes once the child has them, so the checker sees
  end-of-file exactly when the child's side closes.

The zygote ends when its stdin closes (the pool closes it when the run ends) or on SIGTERM; its
children are not its business then: each one ends with its shim. Unix only (``fork``); elsewhere
:func:`available` is false and the pool starts the real command.
"""

from __future__ import annotations

import os
import selectors
import signal
import socket
import sys
import threading
from collections.abc import Sequence
from typing import Final

__all__ = ["SHIM", "available", "serve", "shim_argv"]

#: what the zygote prints on stdout once it listens
READY: Final = b"ready\n"

#: The shim, run with ``python -I -S -c SHIM SOCKET`` (standard library only).
SHIM: Final = r"""
import os, signal, socket, sys
conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    conn.connect(sys.argv[1])
    socket.send_fds(conn, [b"spawn"], [0, 1, 2])
except OSError as exc:
    sys.stderr.write(f"mcpwire fork server unreachable: {exc}\n")
    sys.exit(70)
null = os.open(os.devnull, os.O_RDWR)
os.dup2(null, 0)
os.dup2(null, 1)
def forward(signum, frame):
    try:
        conn.sendall(b"kill %d\n" % signum)
    except OSError:
        pass
for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(signum, forward)
data = b""
while b"\n" not in data:
    chunk = conn.recv(64)
    if not chunk:
        sys.exit(70)
    data += chunk
kind, value = data.split(b"\n", 1)[0].split()
if kind == b"signal":
    signal.signal(int(value), signal.SIG_DFL)
    os.kill(os.getpid(), int(value))
os._exit(int(value))
"""


def available() -> bool:
    """Whether this platform can fork a zygote (POSIX with ``socket.send_fds``)."""
    return hasattr(os, "fork") and hasattr(socket, "send_fds") and hasattr(socket, "AF_UNIX")


def shim_argv(socket_path: str) -> list[str]:
    """The command that stands for one server process of the zygote listening at ``socket_path``."""
    return [sys.executable, "-I", "-S", "-c", SHIM, socket_path]


#: ``MODULE`` of a zygote that runs a script instead: ``script:PATH`` (see :func:`script_module`)
SCRIPT_PREFIX: Final = "script:"


def script_module(path: str) -> str:
    """The ``MODULE`` argument that makes the zygote run the Python script at ``path`` as
    ``__main__`` (a pip console script such as ``mcp-server-time``), with the zygote's arguments."""
    return SCRIPT_PREFIX + path


def _child(conn: socket.socket, fds: list[int], module: str) -> None:
    """In the forked child: take the shim's stdio, watch the shim, run ``module``; never returns."""
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a fresh interpreter

    def watch() -> None:
        # the shim forwards signals; if it goes, so does the child
        buffer = b""
        while True:
            try:
                chunk = conn.recv(64)
            except OSError:
                chunk = b""
            if not chunk:
                os.kill(os.getpid(), signal.SIGKILL)
                return
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                words = line.split()
                if len(words) == 2 and words[0] == b"kill" and words[1].isdigit():
                    os.kill(os.getpid(), int(words[1]))

    threading.Thread(target=watch, daemon=True).start()
    import runpy

    status = 0
    try:
        if module.startswith(SCRIPT_PREFIX):
            # as ``python SCRIPT ARGS...`` would: the script run as __main__ with its arguments
            script = module.removeprefix(SCRIPT_PREFIX)
            sys.argv = [script, *SCRIPT_ARGS]
            runpy.run_path(script, run_name="__main__")
        else:
            # as ``python -m MODULE`` would: no arguments, and the module run afresh as __main__
            sys.argv = [sys.argv[0]]
            sys.modules.pop(module, None)
            runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # the server's own failure: shown on its stderr, as python would
        import traceback

        traceback.print_exc()
        status = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(status)


def serve(module: str, socket_path: str, preload: Sequence[str] = ()) -> None:
    """The zygote: import ``module`` and ``preload`` (what it imports only once it runs), listen at
    ``socket_path``, fork a child per connection.

    One thread, one loop: new connections, ended children (SIGCHLD wakes the loop through a pipe;
    reaping happens in the loop, after the child was registered) and the end of stdin.
    """
    for name in (() if module.startswith(SCRIPT_PREFIX) else (module,)) + tuple(preload):
        __import__(name)
    children: dict[int, socket.socket] = {}
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path)
    listener.listen(64)
    events = selectors.DefaultSelector()
    events.register(listener, selectors.EVENT_READ)
    events.register(wake_read, selectors.EVENT_READ)
    events.register(0, selectors.EVENT_READ)
    sys.stdout.buffer.write(READY)
    sys.stdout.buffer.flush()
    while True:
        for key, _ in events.select():
            if key.fileobj is listener:
                _spawn(listener, children, module, [wake_read, wake_write, events.fileno()])
            elif key.fileobj == wake_read:
                while True:
                    try:
                        if not os.read(wake_read, 512):
                            break
                    except BlockingIOError:
                        break
            elif not _read_stdin():
                return  # the run is over; each child ends with its shim
        _reap(children)


def _read_stdin() -> bool:
    """Read what stdin has; False at its end (or error)."""
    try:
        return bool(os.read(0, 4096))
    except OSError:
        return False


def _spawn(listener: socket.socket, children: dict[int, socket.socket], module: str, own: list[int]) -> None:
    """Accept one shim and fork the child that takes its stdio."""
    conn, _ = listener.accept()
    try:
        _, fds, _, _ = socket.recv_fds(conn, 16, 3)
    except OSError:
        conn.close()
        return
    if len(fds) != 3:
        for fd in fds:
            os.close(fd)
        conn.close()
        return
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        signal.set_wakeup_fd(-1)
        for fd in own:
            os.close(fd)
        listener.close()
        for other in children.values():
            other.close()
        _child(conn, fds, module)
    children[pid] = conn
    for fd in fds:
        os.close(fd)


def _reap(children: dict[int, socket.socket]) -> None:
    """Tell the shim of every child that ended how it ended."""
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is None:
            continue
        if os.WIFSIGNALED(status):
            message = b"signal %d\n" % os.WTERMSIG(status)
        else:
            message = b"exit %d\n" % os.waitstatus_to_exitcode(status)
        try:
            conn.sendall(message)
        except OSError:
            pass
        conn.close()


#: the arguments a ``script:`` zygote gives its script (after ``--`` on its command line)
SCRIPT_ARGS: list[str] = []

if __name__ == "__main__":  # pragma: no cover - run as the zygote process
    if __spec__ is None:
        # run as a file by another interpreter (a server's own venv): this folder is no package
        # of that interpreter's, so it leaves the import path
        here = os.path.dirname(os.path.abspath(__file__))
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    words = sys.argv[1:]
    if "--" in words:
        words, SCRIPT_ARGS[:] = words[: words.index("--")], words[words.index("--") + 1 :]
    if len(words) < 3 or words[0] != "zygote":
        sys.exit("usage: python -m mcpwire.conformance.forkserver zygote MODULE SOCKET [PRELOAD...] [-- ARGS...]")
    serve(words[1], words[2], words[3:])
