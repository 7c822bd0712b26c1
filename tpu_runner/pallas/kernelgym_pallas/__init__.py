"""The pallas backend's Python side: two processes the C++ runner drives. The tracer
(tracer.py) is the only one that runs candidate code; it holds no task data and hands over the
traced program. The judge (judge.py, evaluation.py) never imports candidate code: it checks,
compiles and runs that program next to the task's reference. The runner compares the outputs
(see docs/pallas.md, "Who holds what")."""
