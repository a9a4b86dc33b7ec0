"""A throwaway PostgreSQL server for the tests: initdb into a temporary folder, a free TCP port on 127.0.0.1, the unix
socket in that folder, trust authentication for the superuser `postgres`, stopped with `pg_ctl stop -m immediate`.

PostgreSQL refuses to run as root: as root (CI), the cluster belongs to an unprivileged user (`postgres`, which Debian's
package creates, else `nobody`) and every server binary runs through `runuser -u USER --`.
"""
from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common import free_port

SUPERUSER = "postgres"
UNPRIVILEGED = ("postgres", "nobody")     # who runs the server when we are root


def find_bin_dir() -> Path | None:
    """The folder holding initdb and pg_ctl: on PATH, else Debian's /usr/lib/postgresql/<newest>/bin."""
    on_path = shutil.which("pg_ctl")
    if on_path and shutil.which("initdb"):
        return Path(os.path.realpath(on_path)).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(Path(p).parts[-3].split(".")[0]))
    return Path(candidates[-1]).parent if candidates else None


@dataclass
class PostgresServer:
    bin_dir: Path
    root: Path                  # data/, the socket and server.log live here
    port: int
    runner: list[str]           # [] or ["runuser", "-u", USER, "--"]

    @property
    def host(self) -> str:
        return "127.0.0.1"

    def url(self, database: str, driver: str = "postgresql") -> str:
        """A SQLAlchemy URL (Optuna's storage, MLflow's backend store): `postgresql` or e.g. `postgresql+psycopg2`."""
        return f"{driver}://{SUPERUSER}@{self.host}:{self.port}/{database}"

    def run(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run([*self.runner, str(self.bin_dir / tool), *args], capture_output=True, text=True, cwd=self.root)
        if check and done.returncode:
            raise RuntimeError(f"{tool} {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}\n{self.log_tail()}")
        return done

    def log_tail(self, chars: int = 2000) -> str:
        log = self.root / "server.log"
        return log.read_text(errors="replace")[-chars:] if log.is_file() else ""

    def create_database(self, name: str) -> str:
        """A new empty database; returns its name."""
        self.run("createdb", "-h", self.host, "-p", str(self.port), "-U", SUPERUSER, name)
        return name

    def stop(self) -> None:
        """Stop at once (no checkpoint: the data is thrown away) and remove the folder; idempotent."""
        if (self.root / "data" / "postmaster.pid").exists():
            self.run("pg_ctl", "stop", "-D", str(self.root / "data"), "-m", "immediate", "-w", check=False)
        shutil.rmtree(self.root, ignore_errors=True)


def start(bin_dir: Path, timeout_seconds: int = 60) -> PostgresServer:
    """initdb + pg_ctl start -w; the caller must stop() it. Raises RuntimeError with the server log when it fails."""
    root = Path(tempfile.mkdtemp(prefix="ticketsim-pg-"))
    runner: list[str] = []
    if os.geteuid() == 0:
        user = next((name for name in UNPRIVILEGED if _user_exists(name)), None)
        if user is None or shutil.which("runuser") is None:
            raise RuntimeError(f"running as root, PostgreSQL needs an unprivileged user ({' or '.join(UNPRIVILEGED)}) and runuser")
        entry = pwd.getpwnam(user)
        os.chown(root, entry.pw_uid, entry.pw_gid)   # mkdtemp made it 0700: now the server's user owns it
        runner = ["runuser", "-u", user, "--"]
    server = PostgresServer(bin_dir, root, free_port(), runner)
    try:
        server.run("initdb", "-D", str(root / "data"), "-U", SUPERUSER, "--auth=trust", "--locale=C", "--encoding=UTF8",
                   "--no-sync")
        options = (f"-p {server.port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off "
                   f"-c full_page_writes=off")
        server.run("pg_ctl", "start", "-D", str(root / "data"), "-l", str(root / "server.log"), "-o", options, "-w",
                   "-t", str(timeout_seconds))
    except BaseException:
        server.stop()
        raise
    return server


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False
