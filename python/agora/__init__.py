"""Alias of picomq_connect under the name the custom-sink spec imports (`from agora import ...`)."""
from picomq_connect import *  # noqa: F401,F403
from picomq_connect import __all__, __version__  # noqa: F401
