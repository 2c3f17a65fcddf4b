"""Configuration: YAML models, frozen runtime objects and the loader."""
