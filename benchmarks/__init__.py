"""ssmbench's benchmark scripts, by kind (benchmarks/README.md); a package only so that scripts share code."""
