"""The notebooks' exercise checks, `diagnose` and `check_exercise`: this module is their face;
the checker itself is the package `helpers.checker` (a pipeline of small modules)."""

from helpers.checker import *  # noqa: F403
from helpers.checker import __all__  # noqa: F401
