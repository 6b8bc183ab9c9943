"""How deep JSON may nest: the shared module's (``protocol.jsondepth``), under the name
the server's modules have always used."""

from protocol.jsondepth import MAX_DEPTH, TOO_DEEP, TooDeep, loads, too_deep

__all__ = ["MAX_DEPTH", "TOO_DEEP", "TooDeep", "loads", "too_deep"]
