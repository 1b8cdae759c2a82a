"""The `tinyformer assignment ...` and `tinyformer grade ...` commands."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tinyformer.fileio import save_json

__all__ = ["add_course_commands", "run_course_command"]

VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")  # Gradescope's


def add_course_commands(sub: argparse._SubParsersAction) -> None:
    """Add `assignment list|release|sync|autograder` and `grade` to the top-level subcommands."""
    course = sub.add_parser("assignment", help="list or release course assignments")
    actions = course.add_subparsers(dest="action", required=True)
    actions.add_parser("list", help="the assignments, their tasks and points")
    release = actions.add_parser(
        "release",
        help="write a student version of an assignment",
        description="Copy the library with NAME's solutions stubbed and hidden tests removed, "
        "NAME's notebooks, and the grading data (assignments/NAME.grading.npz).",
    )
    release.add_argument("name", metavar="NAME", help="the assignment, e.g. A2")
    release.add_argument("--out", required=True, metavar="DIR", help="folder to write")
    release.add_argument("--force", action="store_true", help="replace a non-empty DIR")
    release.add_argument(
        "--carry-solutions",
        action="store_true",
        help="keep the instructor's solutions of the assignments already due (a policy choice; "
        "by default they are stubs that the student fills with `assignment sync`)",
    )
    sync = actions.add_parser(
        "sync",
        help="carry your code of earlier assignments into a new release",
        description="Copy the code between the YOUR CODE markers of the assignments already "
        "due (and your tutorial exercises) from your previous release into the new one; the new "
        "assignment's stubs are left alone.",
    )
    sync.add_argument("--from", dest="source", required=True, metavar="OLD", help="previous")
    sync.add_argument("--to", dest="target", default=".", metavar="NEW", help="new (default .)")
    autograder = actions.add_parser(
        "autograder",
        help="write a Gradescope autograder zip for an assignment",
        description="A zip in Gradescope's layout: setup.sh, run_autograder, the instructor's "
        "tree (checks, hidden tests and solutions: the grader's side) and NAME's grading data.",
    )
    autograder.add_argument("name", metavar="NAME", help="the assignment, e.g. A2")
    autograder.add_argument("--out", required=True, metavar="ZIP", help="the zip to write")
    grade = sub.add_parser(
        "grade",
        help="grade an assignment in a tinyformer tree, offline",
        description="Grade NAME's tasks in the submission at DIR: only the student's files of "
        "NAME are taken from DIR, over a pristine copy of the release; each task runs in a "
        "child process of its own, and the checks run here. Print a table. Exit status 0 "
        "whatever the score, 2 on bad input or a refused submission (a link, a FIFO or an "
        "oversized student file: with --json, a results.json of no points says why), 130 when "
        "interrupted (nothing written). As root, --user is required.",
    )
    grade.add_argument("name", metavar="NAME", help="the assignment, e.g. A2")
    grade.add_argument("dir", nargs="?", default=".", metavar="DIR", help="tree (default: .)")
    grade.add_argument("--json", default=None, metavar="FILE", help="write Gradescope's results")
    grade.add_argument("--data", default=None, metavar="FILE", help="grading data to use")
    grade.add_argument(
        "--secret", default=None, metavar="FILE",
        help="the grading salt (default: grading-secret in the instructor's tree)",
    )  # fmt: skip
    grade.add_argument(
        "--timeout", type=float, default=120.0,
        help="seconds for each task's child, visible checks and hidden tests apart (default 120)",
    )  # fmt: skip
    grade.add_argument(
        "--total-timeout", type=float, default=None, metavar="SECONDS",
        help="seconds for the whole grade (default: --timeout per child, plus 60)",
    )  # fmt: skip
    grade.add_argument(
        "--task", action="append", default=None, metavar="ID", help="grade only this task "
        "(e.g. A2.1); repeat for several"
    )  # fmt: skip
    grade.add_argument(
        "--user", default=None, metavar="NAME",
        help="run the student's code as this unprivileged user (needed, and only possible, "
        "when the grader runs as root)",
    )  # fmt: skip
    grade.add_argument(
        "--memory", type=float, default=4096, metavar="MB",
        help="address space of the student's code, in MiB (default 4096; 0: no limit)",
    )  # fmt: skip
    grade.add_argument(
        "--hidden-visibility", default="after_published", choices=VISIBILITIES,
        help="Gradescope visibility of hidden tests in --json (default after_published)",
    )  # fmt: skip


def _list() -> int:
    from tinyformer.course.definition import COURSE

    for a in COURSE.values():
        print(f"{a.name}  {a.title}  ({a.total} points; notebook: {', '.join(a.notebooks)})")
        width = max(len(t.title) for t in a.tasks)
        for t in a.tasks:
            points = ", ".join(f"{kind} {p}" for kind, p in t.points.items())
            print(f"  {t.id}  {t.title.ljust(width)}  {t.total:>2} points ({points})")
    return 0


def run_course_command(args: argparse.Namespace) -> int:
    """Run `assignment ...` or `grade ...`; 2 on bad input."""
    from tinyformer.course.markers import MarkerError

    try:
        if args.command == "grade":
            return _grade(args)
        if args.action == "list":
            return _list()
        if args.action == "sync":
            return _sync(args)
        if args.action == "autograder":
            from tinyformer.course.autograder import write_autograder

            try:
                print(f"autograder: {write_autograder(args.name, args.out)}")
            except OSError as err:
                raise ValueError(_out_error(args.out, err)) from None
            return 0
        from tinyformer.course.release import release

        try:
            report = release(
                args.name, args.out, force=args.force, progress=sys.stderr.isatty(),
                carry_solutions=args.carry_solutions,
            )  # fmt: skip
        except OSError as err:
            raise ValueError(_out_error(args.out, err)) from None
    except (MarkerError, ValueError, OSError) as err:
        print(f"tinyformer {args.command}: error: {err}", file=sys.stderr)
        return 2
    stubbed = ", ".join(f"{tag} x{n}" for tag, n in sorted(report.stubbed.items()))
    print(f"released {args.name} to {report.out}: {report.files} files; stubs: {stubbed}; "
          f"hidden-test regions removed: {report.hidden_removed}")  # fmt: skip
    if report.withheld:
        print(f"kernels left out (answers until due): {', '.join(report.withheld)}")
    print(f"grading data: {report.data}")
    print(f"the student starts with: {report.out / 'START_HERE.md'}")
    print(f"grade it: tinyformer grade {args.name} {report.out}")
    return 0


def _out_error(out: str, err: OSError) -> str:
    """`--out OUT: cannot write (...)`, naming the flag and OUT, never a temporary file."""
    why = err.strerror or type(err).__name__
    return f"--out {out}: cannot write there ({why})"


def _sync(args: argparse.Namespace) -> int:
    from tinyformer.course.sync import sync

    report = sync(args.source, args.target)
    for line in report.lines():
        print(line)
    return 0


def _grade(args: argparse.Namespace) -> int:
    from tinyformer.course.grader.grade import GradeInterrupted, SubmissionError, grade

    if not args.memory >= 0:
        raise ValueError(f"--memory: need MiB >= 0, got {args.memory}")
    memory = int(args.memory * 2**20) if args.memory else None
    if args.user is None and (Path(args.dir) / "tinyformer" / "__init__.py").is_file():
        from tinyformer.course.workspace import mismatch

        warning = mismatch(args.dir)  # (a student's own tree, read as the student)
        if warning:  # the pristine tree it grades in comes from the imported tinyformer
            print(warning, file=sys.stderr)
    try:
        result = grade(
            args.name, args.dir, data=args.data, secret=getattr(args, "secret", None),
            timeout=args.timeout, tasks=args.task, user=args.user, memory=memory,
            total_timeout=args.total_timeout,
        )  # fmt: skip
    except SubmissionError as err:
        if args.json:  # the student learns why on Gradescope: a results.json with no points
            save_json(args.json, {"score": 0, "output": f"submission refused: {err}", "tests": []})
        print(f"tinyformer grade: submission refused: {err}", file=sys.stderr)
        return 2
    except GradeInterrupted as err:  # the children are gone; nothing was written
        print(f"tinyformer grade: {err}; nothing written", file=sys.stderr)
        return 130
    print(f"grading {result.assignment} in {result.tree} (instructor values: {result.data_source})")
    if getattr(result, "containment", ""):
        print(result.containment)
    print(result.table())
    if args.json:
        save_json(args.json, result.gradescope(args.hidden_visibility))
        print(f"results: {args.json}")
    return 0  # an autograder reports the score; it does not fail on it
