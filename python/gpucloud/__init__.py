"""A small client for gpucloud's REST API (standard library only): see docs/python.md."""
from .client import (TERMINAL_PHASES, ApiError, Client, Conflict, GpucloudError, NotFound,
                     WaitTimeout)

__all__ = ["Client", "GpucloudError", "ApiError", "NotFound", "Conflict", "WaitTimeout",
           "TERMINAL_PHASES"]
__version__ = "0.1.0"
