"""The display: a window that shows 1 of every --display-freq frames, and the video writer (window.py)."""

from .window import Renderer, display_available, make_renderer

__all__ = ["Renderer", "display_available", "make_renderer"]
