"""The interpreters: one file per Trace subclass and its rule tables."""
