# Gets past the import rules through an allowed module: numpy's ctypes helper loads libc, and
# libc's system() forks and runs a shell. The static check lets this through (numpy is allowed);
# the worker's seccomp filter must stop it when it runs.
import numpy as np

_libc = np.ctypeslib.load_library("libc.so.6", "/usr/lib/x86_64-linux-gnu")
_libc.system(b"true")


def kernel(a, b):
    return a
