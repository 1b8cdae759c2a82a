"""`tinyformer assignment autograder NAME --out autograder.zip`: a Gradescope autograder.

Gradescope unzips the file into /autograder/source, runs `setup.sh` once when it builds the
image, and `run_autograder` for each submission, which it puts in /autograder/submission; the
results go to /autograder/results/results.json. The zip holds:

- `setup.sh`: installs the instructor's tree (`pip install`), makes an unprivileged user
  `student` with no home, and makes /autograder/source (the secret with it) and the installed
  package readable by root only;
- `run_autograder`: `tinyformer grade NAME /autograder/submission --secret ... --json ...`,
  with `--user student` when it runs as root (as on Gradescope: the grader refuses to run a
  submission as root), so that the student's code can read neither the secret, the
  instructor's tree nor the results; the whole grade must end within `TOTAL_TIMEOUT` seconds
  (540: under Gradescope's default limit of 10 minutes);
- `autograder.json`: the assignment, and the files a student submits (`Assignment.files`);
  a submission may hold them at their paths in the repository or side by side;
- `grading-secret`: the instructor tree's salt, from which the grader draws the samples it
  grades on (no data file: the expected values are computed from the reference at grading);
- `tinyformer/`: the instructor's tree (its package, kernels and packaging files), with
  the checks and hidden tests: the grader's side, never the student's.

`AUTOGRADER_ROOT` (default /autograder) moves the three folders, for a local trial; so does
`TINYFORMER` name the command (default `tinyformer`), `GRADE_USER` the user (default
`student`), `TOTAL_TIMEOUT` the limit, and `GRADE_ARGS` add options.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path

from tinyformer.course.definition import assignment
from tinyformer.course.grader import secret as grading_secret
from tinyformer.course.grader.grade import has_solutions

__all__ = ["write_autograder"]

PACKAGING = ("setup.py", "pyproject.toml", "setup.cfg", "MANIFEST.in", "README.md", "LICENSE")

SETUP = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image.
set -euo pipefail
cd "$(dirname "$0")"
python3 -m pip install --no-cache-dir ./tinyformer
id student >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin student
chmod -R go-rwx "$(pwd)"
# the installed tree holds the solutions and hidden tests: root only (the grader copies a
# stripped release of it for the student's code)
python3 - <<'PY'
import os, pathlib, tinyformer
package = pathlib.Path(tinyformer.__file__).parent
for path in [package, *package.parent.glob("tinyformer-*.dist-info")]:
    for folder, dirs, files in os.walk(path):
        for name in [folder, *(os.path.join(folder, f) for f in files)]:
            os.chmod(name, os.stat(name).st_mode & 0o700)
PY
"""

RUN = """#!/usr/bin/env bash
# Gradescope runs this for each submission. The student's code runs as `student` when this
# runs as root (the grader refuses root otherwise): it can read neither this folder, nor the
# secret, nor the results. The submission is read as that user too.
set -euo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
GRADE_USER="${{GRADE_USER:-student}}"
USER_ARGS=()
if [ "$(id -u)" = 0 ] && id "$GRADE_USER" >/dev/null 2>&1; then
    USER_ARGS=(--user "$GRADE_USER")
    # the submission is read as that user: let it in (source/ stays root's; chmod -R follows
    # no link inside the submission)
    chmod o+x "$ROOT"
    chmod -R a+rX "$ROOT/submission"
fi
mkdir -p "$ROOT/results"
rm -f "$ROOT/results/results.json"
# A refused submission still writes results.json (no points, and why): that is the result.
# shellcheck disable=SC2086  # GRADE_ARGS is a list of options
"${{TINYFORMER:-tinyformer}}" grade {name} "$ROOT/submission" \\
    --secret "$ROOT/source/grading-secret" --json "$ROOT/results/results.json" \\
    --total-timeout "${{TOTAL_TIMEOUT:-540}}" \\
    ${{USER_ARGS[@]+"${{USER_ARGS[@]}}"}} ${{GRADE_ARGS:-}} || [ -s "$ROOT/results/results.json" ]
"""


def _tree_files(root: Path) -> list[Path]:
    from tinyformer.course.release import tree_files

    keep = [f for f in tree_files(root) if f.parts[0] in ("tinyformer", "kernels")]
    return keep + [Path(p) for p in PACKAGING if (root / p).is_file()]


def write_autograder(name: str, out: str | os.PathLike) -> Path:
    """Write assignment `name`'s Gradescope autograder zip to `out`; return its path.

    Raises:
        ValueError: unknown assignment, or the running tinyformer is not the instructor's tree.
    """
    from tinyformer.course.release import source_root
    from tinyformer.fileio import atomic_write

    a = assignment(name)
    if not has_solutions(a):
        raise ValueError(f"the running tinyformer holds no solutions of {a.name}: build the "
                         "autograder from the instructor's tree")  # fmt: skip
    root = source_root()
    config = {"assignment": a.name, "files": list(a.files)}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        for script, text in (("setup.sh", SETUP), ("run_autograder", RUN.format(name=a.name))):
            info = zipfile.ZipInfo(script)
            info.external_attr = 0o100755 << 16  # executable, as Gradescope runs them
            z.writestr(info, text)
        z.writestr("autograder.json", json.dumps(config, indent=2) + "\n")
        secret = zipfile.ZipInfo(grading_secret.FILENAME)
        secret.external_attr = 0o100600 << 16  # the owner's only, as setup.sh leaves it
        z.writestr(secret, grading_secret.read_secret().decode("ascii") + "\n")
        for rel in _tree_files(root):
            z.write(root / rel, f"tinyformer/{rel.as_posix()}")
    out = Path(out).resolve()
    payload = buffer.getvalue()
    atomic_write(out, lambda f: f.write(payload), mode="wb")
    return out
