"""What a release tells the student: `START_HERE.md`, and the head of its README.

Both are written by `tinyformer.course.release` into the release, from the assignment's
definition and the files the release stubbed for it, so that they cannot drift from the code.
"""

from __future__ import annotations

from collections.abc import Mapping

from tinyformer.course.definition import Assignment, due

__all__ = ["readme_head", "start_here"]

INSTALL = 'pip install -e ".[course]"'
CHECK = "python -m tinyformer.course.workspace"


def _files(where: Mapping[str, set[str]], tags: list[str]) -> list[str]:
    # A tutorial's exercise tagged with a task is practice for it, not the graded code.
    return sorted({f for tag in tags for f in where.get(tag, ()) if not f.startswith("tutorials/")})


def start_here(a: Assignment, carry_solutions: bool, where: Mapping[str, set[str]]) -> str:
    """START_HERE.md for the release of `a`; `where` maps a task id to the files holding its
    stubs."""
    earlier = list(due(a.name))
    tasks = "\n".join(
        f"| {t.id} | {t.title} | {', '.join(f'`{f}`' for f in _files(where, [t.id]))} | {t.total} |"
        for t in a.tasks
    )
    files = _files(where, [t.id for t in a.tasks]) + list(a.notebooks)
    notebooks = " ".join(a.notebooks)
    if not earlier:
        carried = "This is the first assignment: nothing to carry over."
    elif carry_solutions:
        carried = (
            f"The solutions of {', '.join(earlier)} are already in this folder: your instructor\n"
            "released it with the solutions of the assignments already due."
        )
    else:
        carried = (
            f"The code of {', '.join(earlier)} is stubbed here too. Bring your own over from\n"
            "your previous release, so that the library runs on your work:\n\n"
            f"```bash\ntinyformer assignment sync --from ../{earlier[-1]} --to .\n```\n\n"
            "`--from` is the folder of your previous release, with your code in it. Sync copies\n"
            "your code between the `### BEGIN YOUR CODE` / `### END YOUR CODE` lines of the\n"
            "assignments already due (and your tutorial exercises), and nothing of this one."
        )
    return f"""# {a.name}: {a.title}

You have the whole library, with the code you are to write replaced by stubs. Each stub is a
line `raise NotImplementedError("...")` (in CUDA sources a `// TODO` comment) between
`### BEGIN YOUR CODE` and `### END YOUR CODE` lines: replace that line with your code and keep
the two marker lines (the next release's `sync` finds your code by them).

## 1. Install (once, in this folder)

```bash
python3 -m venv .venv && source .venv/bin/activate
{INSTALL}
{CHECK}
```

The last command checks that `import tinyformer` loads **this** folder. If you installed
another release before, it says so: run the `pip install` line again here. Every notebook of
the course runs the same check in its first cell and stops if it fails.

## 2. Carry your earlier work over

{carried}

## 3. Write the tasks

| task | what | files | points |
|---|---|---|---|
{tasks}

Open the notebook with JupyterLab (jupytext opens the `.py` source as a notebook):

```bash
jupyter lab {notebooks}
```

Its exercises are for you (they are not graded); each ends with a check that fails loudly
until your code is right. `make docs` builds this folder's documentation into `site/`.

## 4. Grade yourself

```bash
tinyformer grade {a.name} .
```

The table lists each task's checks and points: a self-check on the public samples in
`assignments/{a.name}.grading.npz`. Your grade uses other samples, drawn like these, and the
hidden tests, which are not in this folder: they run when you submit.

## 5. Submit

Upload these files, keeping their paths from this folder:

{chr(10).join(f"- `{f}`" for f in files)}

for example as a zip made here: `zip -r {a.name}.zip {" ".join(files)}`.
"""


def readme_head(a: Assignment) -> str:
    """The lines a release puts first in its README: what this folder is, and its first command."""
    return f"""# tinyformer: assignment {a.name} (student release)

This folder is your release of assignment {a.name}: the library with the code you are to
write stubbed. Read [START_HERE.md](START_HERE.md) first. Install it and check that Python
imports this folder:

```bash
{INSTALL} && {CHECK}
```

Until you have written them, the stubbed parts raise `NotImplementedError`, and so does
anything that runs on them (the training commands below, for instance).

---

"""
