"""Is the `tinyformer` that Python imports the folder being edited?

A student keeps one folder per release (A1, A2, ...) and `pip install -e`s each in turn. A
notebook of A2's folder then imports whichever folder was installed last: it runs A3's finished
softmax while A2's own is still a stub, and nothing says so. `check()`, the first cell of every
course notebook, compares the folder of the imported `tinyformer` with the folder the notebook
sits in and stops with a loud message when they differ; `python -m tinyformer.course.workspace`
does the same from a shell, and `mismatch(tree)` gives the message for a tool to print (the
grader grades a folder's own code, whatever is installed, and says when the two differ).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

__all__ = ["WorkspaceError", "check", "imported_tree", "main", "mismatch", "tree_of"]

_MANIFEST = ("assignments", "RELEASE.json")  # where a release writes it (release.MANIFEST)


class WorkspaceError(RuntimeError):
    """`import tinyformer` loads another folder than the one being edited."""


def tree_of(path: str | os.PathLike) -> Path | None:
    """The tinyformer source folder holding `path` (a folder with `tinyformer/__init__.py`
    and a `setup.py` or `pyproject.toml`), or None."""
    here = Path(path).resolve()
    for folder in (here, *here.parents):
        if (folder / "tinyformer" / "__init__.py").is_file() and any(
            (folder / f).is_file() for f in ("setup.py", "pyproject.toml")
        ):
            return folder
    return None


def imported_tree() -> Path:
    """The folder that holds the `tinyformer` package Python imports (site-packages when it is
    not an editable install)."""
    import tinyformer

    return Path(tinyformer.__file__).resolve().parent.parent


def _describe(tree: Path) -> str:
    try:
        meta = json.loads(tree.joinpath(*_MANIFEST).read_text(encoding="utf-8"))
        return f"{tree} ({meta['assignment']}'s release)"
    except (OSError, ValueError, KeyError, TypeError):
        return str(tree)


def mismatch(tree: str | os.PathLike) -> str | None:
    """A warning when `import tinyformer` does not load the folder `tree`, else None."""
    tree, imported = Path(tree).resolve(), imported_tree()
    if tree == imported:
        return None
    bar = "!" * 78
    return (
        f"{bar}\n"
        f"`import tinyformer` loads {_describe(imported)},\n"
        f"not the folder you are working in, {_describe(tree)}.\n"
        "Your edits here are not what runs. In a terminal, install this folder and restart\n"
        "the notebook's kernel:\n\n"
        f"    cd {tree} && pip install -e .\n"
        f"{bar}"
    )


def check(where: str | os.PathLike | None = None, *, strict: bool = True) -> Path | None:
    """Stop (or warn) when the imported tinyformer is not the tree holding `where`.

    Args:
        where: a path inside the tree being edited; default the working folder (a notebook's
            kernel starts in the notebook's folder).
        strict: raise `WorkspaceError`; else print the warning to stderr and go on.

    Returns:
        The tree, or None when `where` is in no tinyformer tree (nothing to compare).
    """
    tree = tree_of(Path.cwd() if where is None else where)
    if tree is None:
        return None
    message = mismatch(tree)
    if message is None:
        print(f"tinyformer is imported from this folder: {_describe(tree)}")
        return tree
    if strict:
        raise WorkspaceError("\n" + message)
    print(message, file=sys.stderr)
    return tree


def main(argv: list[str] | None = None) -> int:
    """`python -m tinyformer.course.workspace [DIR]`: 0 if DIR (default .) is what Python
    imports, 1 with the warning if not, 2 if DIR is in no tinyformer tree."""
    args = sys.argv[1:] if argv is None else argv
    where = Path(args[0] if args else ".")
    if tree_of(where) is None:
        print(f"{where.resolve()} is not inside a tinyformer folder", file=sys.stderr)
        return 2
    try:
        check(where)
    except WorkspaceError as err:
        print(err, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
