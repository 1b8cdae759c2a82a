"""The offline autograder, `tinyformer grade NAME [DIR]`: a security boundary.

Its face is `grade` (in `grade.py`), which returns a `Grade` of `CheckResult`s, Gradescope's
results.json. The rest is private to it:

- `_tree`: the pristine copy of the release a grade runs in, with the student's files read
  safely (`SubmissionError`) and laid over it;
- `_sandbox`, `_room`, `_landlock`: the child processes that run the student's code, their
  limits and walls, and the grade's own folder and signals (`GradeInterrupted`);
- `_child`: the child itself, the only module here that imports the graded tree (it runs
  there, as a script); `_wire`: the pipe between parent and child;
- `_verdicts`, `_gradcheck`, `_compare`, `_remote`: the checks, run in this process with the
  instructor's code on what the child returns;
- `secret` and `data`: the grading samples, drawn from the secret salt, and the instructor's
  expected values on them (`_codec` stores them);
- `_text`: cleaning what the student's code prints.

It reads the course's definition (`tinyformer.course.definition`) and its marker format
(`markers`), which the release tooling shares, and imports nothing of that tooling
(`release`, `sync`, `handout`, ...): the release imports this package (`data`, to write a
release's self-check data), and the rule of which kernels a release withholds, which both
follow, is `course.files.withheld_kernels`.

This file imports nothing: the grader's child imports `_wire` from here, and must not load the
rest of the grader with it. Callers import `grade` from `tinyformer.course.grader.grade`.
"""
