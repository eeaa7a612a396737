"""Stage 5: render standalone PyTorch modules from resolved specs (jinja2)."""

from attncomp.codegen.render import output_path, render, write_atomically

__all__ = ["output_path", "render", "write_atomically"]
