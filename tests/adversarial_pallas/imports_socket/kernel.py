# Phones home: opens a socket at import time.
import socket

socket.create_connection(("198.51.100.1", 80), timeout=1)


def kernel(a, b):
    return a
