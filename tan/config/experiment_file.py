"""A reference code's experiment file as a model's ``from_foreign_config`` reads it.

Its mappings know where they are in the file, so that a key the file lacks is
reported by its whole path (``MODEL.PROP_MODULE.PARAMS.NUM_LAYERS``), not by its
last part, and a section that is missing reads as an empty one that still
knows its path.
"""


# How a converter's note starts that lists the keys a file leaves out, which take the reference's defaults
# (tan-convert-config repeats it when the converted config is refused: one of them may be why).
DEFAULTS_TAKEN = "keys missing from the file, which take its code's defaults"


class ExperimentFile(dict):
    """A mapping of the file at ``where`` ("" for the top, "MODEL." below it). Indexing a key it
    lacks raises a KeyError whose argument is the key's whole path; the mappings it holds are
    ExperimentFiles too."""

    def __init__(self, data=None, where=""):
        super().__init__(data or {})
        self.where = where
        self.defaulted = {}  # {key: the reference's default}, for keys of a section the file leaves out

    @classmethod
    def of(cls, data):
        return data if isinstance(data, cls) else cls(data)

    def path(self, key):
        """The whole path of ``key`` in the file: "MODEL.PARAMS.NUM_LAYERS"."""
        return f"{self.where}{key}"

    def __getitem__(self, key):
        try:
            value = super().__getitem__(key)
        except KeyError:
            raise KeyError(self.path(key)) from None
        return self._child(key, value)

    def get(self, key, default=None):
        return self[key] if key in self else self._child(key, default)

    def section(self, key, defaults=None):
        """The mapping under ``key`` over ``defaults`` (the reference's own defaults of that section);
        empty when the file leaves it out or leaves it empty. A value that is not a mapping is a TypeError
        naming it."""
        value = super().get(key)
        if value is not None and not isinstance(value, dict):
            raise TypeError(f"{self.path(key)} is {value!r}; expected a mapping of keys")
        node = ExperimentFile({**(defaults or {}), **(value or {})}, self.path(key) + ".")
        node.defaulted = {k: v for k, v in (defaults or {}).items() if k not in (value or {})}
        return node

    def described(self, key):
        """A message's words for ``key``: "is 'x'", "is missing" or, where the reference's default
        stands in for it, "is missing (its code's default: 'x')"."""
        if key in self.defaulted:
            return f"is missing (its code's default: {self.defaulted[key]!r})"
        return f"is {shown(super().get(key))}"

    def defaults_taken(self):
        """The keys of this mapping the file leaves out, which take the reference's defaults: ["A.B 16", ...]."""
        return [f"{self.path(k)} {v!r}" for k, v in self.defaulted.items()]

    def _child(self, key, value):
        if isinstance(value, dict) and not isinstance(value, ExperimentFile):
            return ExperimentFile(value, self.path(key) + ".")
        return value


def shown(value):
    """How a message shows a value read with ``.get()``: a key the file leaves out is "missing", not None."""
    return "missing" if value is None else repr(value)
