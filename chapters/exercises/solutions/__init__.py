"""Reference solutions of the exercises, run by tests/chapters/exercises_test.py."""
