"""The pallas backend's Python side: a worker that the C++ runner drives (worker.py), and the
pieces it is made of. Nothing here decides a verdict on the candidate's word: the runner compares
outputs and reads the clock (see docs/pallas.md)."""
