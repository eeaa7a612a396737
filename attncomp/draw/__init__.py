"""Pictures of specs and runs that need the compiler: `attncomp draw` (a spec's architecture, or two specs
side by side) and `attncomp page` (one HTML page per run). See docs/pictures.md."""
