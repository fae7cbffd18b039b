"""The authors' and teachers' notebook tools, each run as `python -m course.authoring.NAME`:
`slides` (RISE's slide metadata from each notebook's structure), `maths` (backticked formulas into
MathJax), `strip_widget_state` (no saved widget state in git), all three run by `make notebooks`;
`class_time` (each notebook's minutes by the course's class-time rule)."""
