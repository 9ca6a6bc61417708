"""The canonical trace directory: schema, manifest, validation and atomic writing."""
