"""Course assignments: solution markers, student releases and an offline autograder.

- `tinyformer.course.definition`: the assignments, their tasks and points (`COURSE`).
- `tinyformer.course.markers`: nbgrader-style solution and hidden-test regions, and stripping.
- `tinyformer.course.release`: `tinyformer assignment release NAME --out DIR`, a student
  version that ships no answer (`handout` writes its START_HERE.md and README head).
- `tinyformer.course.sync`: `tinyformer assignment sync --from OLD --to NEW`, a student's own
  code of the assignments already due, carried into the next release.
- `tinyformer.course.workspace`: `check()`, whether `import tinyformer` loads the folder being
  edited (the first cell of every course notebook).
- `tinyformer.course.grader.grade`: `tinyformer grade NAME [DIR]`, Gradescope's results.json; the
  expected values come from the instructor's reference (`data`), on samples drawn from a
  secret salt (`secret`).
- `tinyformer.course.assignments`: one folder per assignment (`a1/` ... `a6/`): its `checks`
  (property and hidden tests, loaded by the grader), the `drivers` those tests call in the
  grader's child, and the code of assignments that are not library ops (`a1/autograd.py`, a
  scalar autograd engine; `a5/kernels.py`, `a5/cuda.py` + `a5/softmax.cu`, softmax kernels in
  Numba and in CUDA, which register themselves when imported).

docs/instructors.md walks through all of it.
"""

from tinyformer.course.definition import COURSE, Assignment, Task, assignment

__all__ = ["COURSE", "Assignment", "Task", "assignment"]
