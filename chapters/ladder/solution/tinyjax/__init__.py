"""tinyjax: the package the ladder builds, one module per rung (chapters/ladder/README.md)."""
