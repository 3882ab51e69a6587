"""Knowledge as data, below doctor/, tune/ and changes/: the safe expression language
(expr.py), the key -> line locator of TOML files (locate.py), and the one loader of the
files that hold expressions (load.py)."""
