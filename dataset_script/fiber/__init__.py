"""The FIBER dataset builder and the bundled synthetic sample in the release format."""
