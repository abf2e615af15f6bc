"""A name -> builder mapping, so configs can name components."""
from ..errors import TanError


class Registry:
    def __init__(self, name):
        self.name = name
        self._items = {}

    def register(self, name=None):
        def deco(obj):
            key = name or obj.__name__
            if key in self._items:
                raise KeyError(f"{key!r} is already registered in {self.name}")
            self._items[key] = obj
            return obj

        return deco

    def get(self, name):
        if name not in self._items:
            raise TanError(f"unknown {self.name} {name!r}; registered: {', '.join(sorted(self._items))}")
        return self._items[name]

    def __contains__(self, name):
        return name in self._items

    def names(self):
        return sorted(self._items)
