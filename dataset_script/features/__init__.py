"""Video features from raw clips with a current encoder (`fiberbench extract-features`), for FIBER models."""
