# Reaches native code through an allowed module: numpy's ctypes helper loads libc, whose write()
# could forge the worker's report (a TPU time, a verdict) and whose system() forks a shell. The
# static check refuses the door itself (numpy.ctypeslib); seccomp would stop the fork and exec
# (PallasConfine tests that layer on its own).
import numpy as np

_libc = np.ctypeslib.load_library("libc.so.6", "/usr/lib/x86_64-linux-gnu")
_libc.system(b"true")


def kernel(a, b):
    return a
