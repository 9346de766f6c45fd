"""`skillbank validate`: the bank's skill folders, frontmatter, links, manifests and generated files."""
