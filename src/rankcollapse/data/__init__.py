"""Data shipped with rankcollapse: the built-in sample corpus (corpus.txt)."""
