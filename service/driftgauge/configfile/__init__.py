"""The config file: its YAML models, built from the store kinds, and the loader."""
