"""The tested code that the pages show and readers copy: one module per concept."""
