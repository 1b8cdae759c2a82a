"""One rank of `tinyformer launch`: runs `python ARGS...` as its child and, when the child
ends, writes its rank and exit (status, or the signal that killed it) to STATUS_DIR, for the
launcher to name a rank that died. A rank killed by a signal cannot say so itself.

    python _rank.py STATUS_DIR ARGS...

Run as a script by path, not as `-m tinyformer...`: it imports only the standard library, so
that each rank does not import NumPy twice. mpiexec signals a rank's whole process group (the
child's too), so this passes no signal on: it ignores them and waits for the child's exit.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys


def main(argv: list[str]) -> int:
    status_dir, args = argv[0], argv[1:]
    # the child inherits the MPI process manager's descriptors (PMI_FD): close_fds=False
    child = subprocess.Popen([sys.executable, *args], close_fds=False)
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)  # the child got it too: it saves, then exits
    code = child.wait()
    rank = os.environ.get("PMI_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "?"))
    record = {"rank": rank, "pid": child.pid, "returncode": code}
    path = os.path.join(status_dir, f"rank-{rank}.json")
    try:
        with open(path + ".tmp", "w") as f:
            json.dump(record, f)
        os.replace(path + ".tmp", path)  # the launcher never reads half a record
    except OSError:
        pass  # the launcher then says less; the exit status is still passed on
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
