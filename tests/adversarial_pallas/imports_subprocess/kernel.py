# Runs a program.
import subprocess

subprocess.run(["cat", "/etc/passwd"])


def kernel(a, b):
    return a
