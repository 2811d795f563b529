"""Where a run happens: ``resolve_device`` (defined with the participation package, whose
Monte-Carlo delays run on a device too)."""
from participation.devices import resolve_device

__all__ = ["resolve_device"]
