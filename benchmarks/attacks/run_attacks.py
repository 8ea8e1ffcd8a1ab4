"""A hostile repository, attack by attack: HELD or ESCAPED for each, exit 1 on any escape.

    python benchmarks/attacks/run_attacks.py [--only NAME] [--as-user USER [--create-user]]

Each attack is code a repository could hold, verified through the real pipeline (the
warm worker, its jobs, the run children in their namespaces) or through the real
command line, and a check made *from outside* afterwards: a marker file that must not
exist, a listener of the runner's that must not have been reached, a process that must
still be alive, a verdict that must not say "accepted", output that must not carry a
secret or a raw escape sequence. The classes are those of issue 21 (the worker, the
configuration, the ways out of the sandbox, forged evidence, resources, breaking the
tool, output), then the list of what held before and must keep holding.

Rules the attacks keep: they target only loopback and sockets this runner creates; each
is bounded in time (the verifier's timeout) and size (a sparse file, memory under a
cgroup limit); none writes a host-wide kernel setting: opening one for writing is the
proof of a hole, and the file is closed unwritten. Nothing here injects into a
terminal: a run that can open ``/dev/tty`` or has a terminal on a standard stream is an
escape without pushing a character.

Run it as root and as an unprivileged user. ``--as-user USER`` runs the same attacks
again as USER (``--create-user`` first makes it with ``useradd --system`` if missing);
the repository and an interpreter with autograd-fix installed must be readable by that
user (``--user-python``: a virtual environment made from a pyenv under ``/root`` is
not, so make one from the system's Python elsewhere, e.g.
``/usr/bin/python3.11 -m venv /tmp/agf-user-venv && /tmp/agf-user-venv/bin/pip install
torch==2.13.0 -e .``). A documented
limit that this machine cannot close (memfd memory without a memory cgroup, as an
unprivileged user) prints ``LIMIT`` with the reason and does not fail the run.

Slow (a minute or two): the fast versions of these attacks are in tests/ (test_isolation,
test_hostile_repository, test_hostile_inputs, test_hostile_output, test_sandbox).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from attacks_lib import Bench, Result, held, escaped, limit  # noqa: E402

ATTACKS: list[tuple[str, str, Callable[[Bench], Result]]] = []


def attack(klass: str):
    def register(function: Callable[[Bench], Result]) -> Callable[[Bench], Result]:
        ATTACKS.append((klass, function.__name__, function))
        return function
    return register


# -- 1. the worker ------------------------------------------------------------------------
@attack("worker")
def stdlib_module_in_the_users_folder(b: Bench) -> Result:
    marker = b.marker()
    repo = b.repo()
    (repo / "selectors.py").write_text(
        f"open({str(marker)!r}, 'w').write(open('/proc/self/environ').read())\n"
        "import importlib, sys\ndel sys.modules['selectors']\nsys.path = [p for p in sys.path if p not in ('', '.')]\n"
    )
    done = b.cli(["--diff", "model.py"], cwd=repo, env={"AGF_ATTACK_SECRET": "hunter2-attack-secret"})
    return escaped("the worker imported the repository's selectors.py") if marker.exists() else held(f"exit {done.returncode}")


# -- 2. configuration -----------------------------------------------------------------------
@attack("configuration")
def repository_turns_isolation_off(b: Bench) -> Result:
    marker = b.marker()
    repo = b.repo(script=f"open({str(marker)!r}, 'w').write('x')\n", pyproject='[tool.autograd-fix.verify]\nisolation = "off"\n')
    b.cli(["--diff", "model.py"], cwd=repo)
    return escaped("isolation = \"off\" from the repository let a run write outside") if marker.exists() else held("ignored")


@attack("configuration")
def repository_passes_the_users_secret(b: Bench) -> Result:
    secret = "hunter2-" + uuid.uuid4().hex
    repo = b.repo(script="import os\nprint(os.environ.get('AGF_ATTACK_SECRET'))\nraise SystemExit(os.environ.get('AGF_ATTACK_SECRET'))\n",
                  pyproject='[tool.autograd-fix.verify]\npass-env = ["AGF_ATTACK_SECRET"]\n')
    done = b.cli(["--diff", "model.py", "--format", "github"], cwd=repo, env={"AGF_ATTACK_SECRET": secret})
    return escaped("the secret reached the output") if secret in done.stdout + done.stderr else held("not passed, not shown")


# -- 3. ways out of the sandbox -------------------------------------------------------------
@attack("sandbox")
def controlling_terminal(b: Bench) -> Result:
    out = b.run_code("""
    import os
    got = [fd for fd in (0, 1, 2) if os.isatty(fd)]
    try:
        os.close(os.open("/dev/tty", os.O_RDWR)); got.append("tty")
    except OSError:
        pass
    print("TERMINAL", got)
    """)
    return escaped(out) if "TERMINAL []" not in out else held("no terminal, no /dev/tty")


@attack("sandbox")
def unix_socket_in_tmp(b: Bench) -> Result:
    with b.unix_listener("tmux-") as (path, accepted):
        b.run_code(f"""
        import socket
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect({path!r}); s.send(b"new-window 'touch /tmp/pwned'")
        except OSError as e:
            print(e)
        """)
        count = accepted()
    return escaped(f"{count} connection(s) reached the runner's socket in /tmp") if count else held("socket not there")


@attack("sandbox")
def kernel_settings_and_kmsg(b: Bench) -> Result:
    out = b.run_code("""
    import os
    opened = []
    for path in ("/proc/sys/kernel/core_pattern", "/proc/sys/vm/drop_caches", "/dev/kmsg", "/proc/sysrq-trigger",
                 "/sys/kernel/mm/transparent_hugepage/enabled"):
        try:
            os.close(os.open(path, os.O_WRONLY))  # opened, closed unwritten: the proof of a hole
            opened.append(path)
        except OSError:
            pass
    print("OPENED", opened)
    """)
    return escaped(out) if "OPENED []" not in out else held("none opens for writing")


@attack("sandbox")
def files_outside_the_project(b: Bench) -> Result:
    secret = b.secret_file()
    out = b.run_code(f"""
    got = []
    for path in ({str(secret)!r}, "/etc/shadow", "/root/.bash_history", {str(Path.home() / ".ssh" / "id_rsa")!r}):
        try:
            if open(path).read(1):  # whether it reads, never what: a real key must not be printed
                got.append(path)
        except OSError:
            pass
    print("READ", got)
    """)
    return escaped(out[:200]) if "READ []" not in out else held("nothing outside the project readable")


@attack("sandbox")
def session_keyring(b: Bench) -> Result:
    if os.uname().machine != "x86_64":
        return limit("keyring attack written for x86_64 syscall numbers")
    libc = ctypes.CDLL(None, use_errno=True)
    payload = b"agf-keyring-" + uuid.uuid4().hex.encode()
    serial = libc.syscall(248, b"user", b"agf-attack", payload, len(payload), -3)  # add_key to @s
    if serial < 0:
        return limit(f"no keyring here (add_key: errno {ctypes.get_errno()})")
    try:
        out = b.run_code(f"""
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        buf = ctypes.create_string_buffer(256)
        found = libc.syscall(250, 10, -3, b"user", b"agf-attack", 0)  # KEYCTL_SEARCH in @s
        read = libc.syscall(250, 11, {serial}, buf, 256) if True else -1  # KEYCTL_READ by serial
        planted = libc.syscall(248, b"user", b"agf-planted", b"x", 1, -3)
        print("KEY", found, read, buf.raw[:40])
        """)
        planted = libc.syscall(250, 10, -3, b"user", b"agf-planted", 0)
    finally:
        libc.syscall(250, 21, serial, 0)  # KEYCTL_INVALIDATE
    if payload.decode() in out:
        return escaped("the run read a key of the tool's session keyring")
    if planted > 0:
        libc.syscall(250, 21, planted, 0)
        return escaped("a key the run planted stayed in the tool's session keyring")
    return held("keyring of its own")


@attack("sandbox")
def system_v_ipc_outlives_the_run(b: Bench) -> Result:
    key = 0x41470000 + os.getpid() % 0xFFFF
    b.run_code(f"""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmget({key}, 4096, 0o1600); libc.msgget({key}, 0o1600); libc.semget({key}, 1, 0o1600)
    """)
    left = []
    for kind in ("shm", "msg", "sem"):
        with open(f"/proc/sysvipc/{kind}") as handle:
            if any(line.split()[0] == str(key) for line in handle.read().splitlines()[1:] if line.strip()):
                left.append(kind)
    return escaped(f"left behind: {left}") if left else held("died with the run")


@attack("sandbox")
def the_other_side(b: Bench) -> Result:
    out = b.run_code("""
    import os
    fds = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
    extra = [fd for fd in fds if fd not in (0, 1, 2, 200)]
    parent = os.path.dirname(os.environ["HOME"].rstrip("/").rsplit("/", 1)[0])
    others = [n for n in os.listdir(parent) if n.startswith("agf-run-")] if os.path.isdir(parent) else []
    print("EXTRA", len(extra) > 1, "OTHERS", others)  # one descriptor: the listing itself
    """)
    return escaped(out) if "EXTRA False OTHERS []" not in out else held("no inherited descriptor, no other folder")


# -- 4. forged evidence ---------------------------------------------------------------------
ZEROED = "import torch\nx = torch.ones(3, requires_grad=True)\ny = (x * 2).sum()\ny.backward()\nout = x.grad.clone()\n"


@attack("evidence")
def patch_torch_save(b: Bench) -> Result:
    hook = "import torch\n_real = torch.save\ntorch.save = lambda obj, f, *a, **k: _real({}, f)\n"
    verdict = b.verify(hook + ZEROED, hook + ZEROED.replace("out = x.grad.clone()", "out = torch.zeros(3)"))
    return escaped("a zeroing fix was accepted") if verdict.verdict == "accepted" else held(verdict.verdict)


@attack("evidence")
def exit_before_the_change_runs(b: Bench) -> Result:
    early = "import os\nos._exit(0)\n"
    verdict = b.verify(early + ZEROED, early + ZEROED.replace("out = x.grad.clone()", "out = torch.zeros(3)"))
    return escaped("accepted after os._exit(0)") if verdict.verdict == "accepted" else held(verdict.verdict)


# -- 5. resources -------------------------------------------------------------------------------
@attack("resources")
def memory_through_memfd(b: Bench) -> Result:
    from autograd_fix.verification import cgroup

    out = b.run_code("""
    import os
    held = 0
    try:
        for _ in range(8):
            fd = os.memfd_create("hog"); os.write(fd, b"x" * (128 << 20)); held += 128
    except OSError:
        pass
    print("HELD_MB", held)
    """, memory_mb=300, timeout=30)
    where = cgroup.base()
    if "HELD_MB 1024" in out:
        if not isinstance(where, tuple):
            return limit(f"memfd is not counted here: {where}")
        return escaped("1 GB held through memfd under a 300 MB limit")
    return held("stopped under the limit")


@attack("resources")
def disk_and_processes(b: Bench) -> Result:
    out = b.run_code("""
    import os
    big = False
    try:
        with open("big", "wb") as f:
            f.seek(1100 << 20); f.write(b"x")  # sparse: no disk used, one byte past 1 GB
        big = True
    except OSError:
        pass
    made = 0
    try:
        for _ in range(4000):
            os.posix_spawn("/bin/sleep", ["sleep", "20"], {}); made += 1
    except OSError:
        pass
    print("BIG", big, "MANY", made >= 4000)
    """, timeout=30)
    return escaped(out) if "BIG False MANY False" not in out else held("file size and process count limited")


# -- 6. breaking the tool ------------------------------------------------------------------------
@attack("tool")
def fifo_and_device_in_the_project(b: Bench) -> Result:
    repo = b.repo()
    os.mkfifo(repo / "queue.fifo")
    os.mkfifo(repo / "record.pt")
    began = time.monotonic()
    done = b.cli(["--diff", "model.py", "--verify-timeout", "3"], cwd=repo, timeout=120)
    spent = time.monotonic() - began
    broke = "Traceback" in done.stderr or done.returncode > 2
    return escaped(f"stalled {spent:.0f} s, exit {done.returncode}") if spent > 90 or broke else held(f"{spent:.0f} s, exit {done.returncode}")


@attack("tool")
def deep_folder(b: Bench) -> Result:
    repo = b.repo()
    fd = os.open(repo, os.O_RDONLY)
    for _ in range(1100):  # one level at a time: os.makedirs recurses
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(os.open("x.py", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    os.close(fd)
    done = b.cli(["--check", "."], cwd=repo)
    return escaped(f"exit {done.returncode}: {done.stderr[-200:]}") if done.returncode != 2 else held("a per-path error, exit 2")


@attack("tool")
def sighup_cleans_up(b: Bench) -> Result:
    repo = b.repo(script="import time\ntime.sleep(20)\n")
    tmp = Path(tempfile.mkdtemp(prefix="agf-hup-"))
    proc = subprocess.Popen(b.cli_command(["--diff", "model.py"]), cwd=repo, env={**b.env(), "TMPDIR": str(tmp)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(tmp.glob("agf-verify-*/agf-run-*")):
        time.sleep(0.2)
    proc.send_signal(signal.SIGHUP)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        return escaped("the tool did not end on SIGHUP")
    time.sleep(1)
    left = list(tmp.iterdir())
    shutil.rmtree(tmp, ignore_errors=True)
    return escaped(f"left {left}") if left else held("scratch removed")


# -- 7. output -------------------------------------------------------------------------------------
@attack("output")
def escape_sequences_and_odd_names(b: Bench) -> Result:
    payload = "\\x1b]52;c;cHduZWQ=\\x07\\x1b[1A\\x1b[2Kaccepted"
    repo = b.repo(script=f"import sys\nprint('{payload}')\nraise RuntimeError('{payload}')\n")
    odd = repo / "odd\nname\x1b[31m.py"
    odd.write_text((repo / "model.py").read_text())
    done = b.cli(["--diff", "model.py", str(odd.name)], cwd=repo)
    raw = "\x1b" in done.stdout or "\x1b" in done.stderr or "\x07" in done.stdout
    split = any(line.startswith("name") for line in done.stdout.splitlines())
    return escaped("raw control characters or a split diff header reached the output") if raw or split else held("escaped")


# -- what held before and must keep holding ----------------------------------------------------
@attack("held before")
def writes_to_the_project_home_tmp_shm(b: Bench) -> Result:
    marker = uuid.uuid4().hex
    project_file = b.project / "data.py"
    before = project_file.read_text()
    targets = [str(project_file), str(b.project / ".." / f"agf-{marker}"), f"/tmp/agf-{marker}", f"/dev/shm/agf-{marker}",
               os.path.join(os.path.expanduser("~"), f".agf-{marker}")]
    b.run_code(f"""
    import os
    for path in {targets!r} + ["/proc/self/cwd/../../../" + "{project_file.name}"]:
        try:
            with open(path, "a") as f:
                f.write("pwned")
        except OSError:
            pass
    """)
    landed = [t for t in targets[1:] if os.path.exists(t)]
    for t in landed:
        os.unlink(t)
    changed = project_file.read_text() != before
    return escaped(f"landed: {landed}, project changed: {changed}") if landed or changed else held("nothing landed")


@attack("held before")
def network_to_loopback(b: Bench) -> Result:
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(4)
    tcp.settimeout(0.3)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.settimeout(0.3)
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    name = "\0agf-attack-" + uuid.uuid4().hex
    abstract.bind(name)
    abstract.listen(4)
    abstract.settimeout(0.3)
    b.run_code(f"""
    import socket
    for family, kind, address in ((socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", {tcp.getsockname()[1]})),
                                  (socket.AF_UNIX, socket.SOCK_STREAM, {name!r})):
        try:
            s = socket.socket(family, kind); s.settimeout(1); s.connect(address); s.send(b"x")
        except OSError:
            pass
    try:
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", {udp.getsockname()[1]}))
    except OSError:
        pass
    try:
        socket.getaddrinfo("localhost", 53)
    except OSError:
        pass
    """)
    reached = []
    for label, sock in (("tcp", tcp), ("abstract", abstract)):
        try:
            sock.accept()[0].close()
            reached.append(label)
        except OSError:
            pass
    try:
        udp.recv(16)
        reached.append("udp")
    except OSError:
        pass
    for sock in (tcp, udp, abstract):
        sock.close()
    return escaped(f"reached: {reached}") if reached else held("no connection")


@attack("held before")
def environment_and_pid_1(b: Bench) -> Result:
    secret = "hunter2-" + uuid.uuid4().hex
    os.environ["AGF_ATTACK_SECRET"] = secret
    try:
        out = b.run_code("""
        import os
        seen = dict(os.environ)
        try:
            seen["pid1"] = open("/proc/1/environ").read()
        except OSError:
            pass
        try:
            seen["ppid"] = open(f"/proc/{os.getppid()}/environ").read()
        except OSError:
            pass
        print(seen)
        """, fresh_worker=True)
    finally:
        os.environ.pop("AGF_ATTACK_SECRET", None)
    return escaped("the secret reached the run") if secret in out else held("scrubbed")


@attack("held before")
def daemons_signals_ptrace(b: Bench) -> Result:
    victim = subprocess.Popen(["sleep", "60"])
    tag = "agf-daemon-" + uuid.uuid4().hex[:8]
    try:
        b.run_code(f"""
        import ctypes, os, signal
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.kill({victim.pid}, sig)
            except OSError:
                pass
        ctypes.CDLL(None).ptrace(16, {victim.pid}, 0, 0)  # PTRACE_ATTACH
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv("/bin/sleep", ["sleep", "300", "{tag}"])
            os._exit(0)
        """)
        time.sleep(0.5)
        alive = victim.poll() is None
        traced = "TracerPid:\t0" not in Path(f"/proc/{victim.pid}/status").read_text() if alive else False
        daemons = [p for p in os.listdir("/proc") if p.isdigit() and tag.encode() in _cmdline(p)]
    finally:
        victim.kill()
        victim.wait()
    if not alive or traced or daemons:
        return escaped(f"victim alive: {alive}, traced: {traced}, daemons left: {daemons}")
    return held("victim untouched, nothing outlived the run")


def _cmdline(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@attack("held before")
def hang_flood_and_processes(b: Bench) -> Result:
    began = time.monotonic()
    verdict = b.verify(
        "import torch\nimport os, sys\nfor _ in range(200):\n    os.posix_spawn('/bin/sleep', ['sleep', '61.5'], {})\n"
        "while True:\n    sys.stdout.write('x' * 65536)\n",
        "import torch\nwhile True:\n    pass\n", timeout=4,
    )
    spent = time.monotonic() - began
    time.sleep(0.5)
    left = [p for p in os.listdir("/proc") if p.isdigit() and _cmdline(p) == b"sleep\x0061.5\x00"]
    if verdict.verdict == "accepted" or spent > 60 or left:
        return escaped(f"{verdict.verdict} after {spent:.0f} s, {len(left)} processes left")
    return held(f"{verdict.verdict}, {spent:.0f} s, none left")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", action="append", default=[], help="run only the attacks with this name (repeatable)")
    parser.add_argument("--as-user", help="then run the attacks again as this user (the runner must be root)")
    parser.add_argument("--create-user", action="store_true", help="make --as-user with useradd --system if missing")
    parser.add_argument("--user-python", default=sys.executable,
                        help="the interpreter for the --as-user run (one that user may execute, with autograd-fix installed)")
    args = parser.parse_args()
    failed = run_all(args.only)
    if args.as_user:
        failed |= run_as(args.as_user, args.create_user, args.only, args.user_python)
    return 1 if failed else 0


def run_all(only: list[str]) -> bool:
    """Every attack as the current user; True when one escaped."""
    who = pwd.getpwuid(os.geteuid()).pw_name
    print(f"== attacks as {who} (uid {os.geteuid()})", flush=True)
    counts = {"HELD": 0, "ESCAPED": 0, "LIMIT": 0}
    with Bench() as bench:
        for klass, name, function in ATTACKS:
            if only and name not in only:
                continue
            began = time.monotonic()
            try:
                result = function(bench)
            except Exception as exc:  # noqa: BLE001 - an attack that breaks the runner is reported, not hidden
                result = escaped(f"the attack itself failed: {type(exc).__name__}: {exc}")
            counts[result.status] += 1
            print(f"{result.status:8} {klass:14} {name:40} {time.monotonic() - began:5.1f} s  {result.detail[:150]!r}", flush=True)
    print(f"== {counts['HELD']} held, {counts['ESCAPED']} escaped, {counts['LIMIT']} documented limits", flush=True)
    return counts["ESCAPED"] > 0


def run_as(user: str, create: bool, only: list[str], python: str) -> bool:
    """This runner again, as `user`."""
    if os.geteuid() != 0:
        raise SystemExit("--as-user needs root")
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        if not create:
            raise SystemExit(f"no user {user}: pass --create-user, or make one (useradd --system {user})")
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", user], check=True)
        entry = pwd.getpwnam(user)
    home = tempfile.mkdtemp(prefix="agf-attack-home-")
    os.chown(home, entry.pw_uid, entry.pw_gid)
    command = [python, __file__, *(f"--only={name}" for name in only)]

    def become() -> None:
        os.setgroups([])
        os.setgid(entry.pw_gid)
        os.setuid(entry.pw_uid)

    env = {**os.environ, "HOME": home, "USER": user, "LOGNAME": user, "TMPDIR": home}
    try:
        done = subprocess.run(command, preexec_fn=become, env=env, cwd=home)
    finally:
        subprocess.run(["rm", "-rf", "--", home], check=False)
    return done.returncode != 0


if __name__ == "__main__":
    raise SystemExit(main())
