"""Generated files of the bank: action schemas, manifests, spec templates, AutoML support, parameter tables."""
