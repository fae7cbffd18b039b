"""The course's tools: what a student, a teacher or an author runs, and no notebook imports.

- `course.commands`: the entry point, `python -m course lab|test|student|notebooks|bench|site|
  report` (standard library only: it runs with the system's Python, before .venv/ exists).
- `course.site`: the static site (with `site_assets/`: the page template and the panels' loader).
- `course.submissions`: a class's submitted notebooks read (never run): which exercise, what code.
- `course.grade`: the checker run on submitted notebooks, each in a child of a `course.worker`
  process, in `course.sandbox`'s confinement.
- `course.report`: the class report made from those grades.
- `course.student`: the student copy (each exercise's solution replaced by its skeleton).
- `course.bench`: `make bench`'s speed figures, with `course.browser` (JupyterLab driven in
  Chromium, which the browser tests share) and `course.sample_class` (a generated class).
- `course.authoring`: the notebooks' slide metadata, maths and class time.

Imports run one way: `course` may import `helpers` (the checker, the panels), never `tests`;
`helpers` imports neither, except `helpers/course.py`, the old entry point, which only forwards
(tests/test_house.py holds them to it).
"""
