"""Where a run happens: a torch device named by the user, checked once with a one-line
ValueError (a name torch does not parse, a meta device that holds no data, a device this machine
does not have). torch is imported only when a device is named, so the participation package
stays free of it otherwise."""
from __future__ import annotations

__all__ = ["resolve_device"]


def resolve_device(device, name: str = "device"):
    """``device`` (None, a string or a ``torch.device``) as a usable ``torch.device``; None stays
    None (the problem's own device, the CPU by default)."""
    if device is None:
        return None
    import torch

    text = str(device)
    try:
        dev = device if isinstance(device, torch.device) else torch.device(text.strip())
    except (RuntimeError, ValueError, TypeError):
        raise ValueError(f"{name} {text[:60]!r} is not a torch device; e.g. cpu, cuda, cuda:0") from None
    if dev.type == "meta":
        raise ValueError(f"{name} {text!r}: meta tensors hold no data, so nothing can run on them; use cpu or cuda")
    if dev.type == "cpu":
        return dev
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"{name} {text!r} is not available here (torch finds no CUDA device)")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ValueError(f"{name} {text!r} is not available here (this machine has {torch.cuda.device_count()} CUDA "
                         f"device(s): cuda:0 to cuda:{torch.cuda.device_count() - 1})")
    try:
        torch.zeros(1, device=dev).cpu()
    except Exception as err:      # noqa: BLE001 - backends not built in raise RuntimeError, AssertionError, ...
        reason = " ".join(str(err).split()).split(". ")[0] or type(err).__name__     # torch's first sentence
        reason = reason if len(reason) <= 160 else reason[:160] + "…"
        raise ValueError(f"{name} {text!r} is not available here ({reason})") from None
    return dev
