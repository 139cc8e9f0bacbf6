"""Data shipped with rankcollapse: the built-in sample corpus (corpus.txt) and the catalogue
of experiments and models the command line lists without importing them (catalog.json,
generated: see `rankcollapse.cli.catalog`)."""
