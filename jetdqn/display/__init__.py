"""The display: what is shown and recorded (renderer.py), the window's own process (viewer.py), and the
picture and X server check they share (window.py)."""

from .renderer import Renderer, make_renderer
from .window import display_available

__all__ = ["Renderer", "display_available", "make_renderer"]
