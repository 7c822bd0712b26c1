# Never returns: loops forever while being traced.


def kernel(a, b):
    while True:
        pass
