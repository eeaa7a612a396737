"""Stage 5: print standalone PyTorch modules from the optimised graphs of compiled specs."""

from attncomp.codegen.render import output_path, render, write_atomically

__all__ = ["output_path", "render", "write_atomically"]
