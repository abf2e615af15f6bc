"""A memory path stands in for a model's own definition only while it is that definition.

The band and strip paths of a stack (band.py, strips.py) are written for the
definition of the module they serve (a fusion's ``fuse``, a stack layer's
``activate``): the same operations, another storage. A subclass that redefines
one of those methods trains through its own definition instead, on the dense
path; editing the definition in place is caught by the equivalence tests
(tests/test_memory_paths.py), which compare every path with the plain one.
"""


def runs_own_definition(module, base, *methods):
    """Whether ``module`` runs ``base``'s ``methods`` (none redefined by its class)."""
    return all(getattr(type(module), name) is getattr(base, name) for name in methods)
