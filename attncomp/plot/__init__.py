"""Pictures of what runs wrote, without the compiler: `attncomp plot` (runs' curves) and the sweep's chart;
and the figure helpers every picture uses (matplotlib, the `plot` extra). See docs/pictures.md."""
