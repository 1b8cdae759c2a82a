"""The assignments' own files, one folder per assignment (`a1/` ... `a6/`).

Each folder may hold `checks.py` (the property and hidden tests the grader loads, named by
`Assignment.checks` in `tinyformer/course/definition.py`), `drivers.py` (what those tests call
in the grader's child to build the student's objects there), `samples.py` (which drawn samples
grade a task, and the widened ones where its skill hides: `Task.keep`, `Task.widen`), and the
code of an assignment that is no library op (A1's scalar engine, A5's kernels). Adding an
assignment is one folder here plus one `Assignment` in `definition.py`.

No `__init__.py` here imports its siblings: importing `a5/kernels.py` registers Numba kernels
for the whole process, and the checks are imported only when asked for.
"""
