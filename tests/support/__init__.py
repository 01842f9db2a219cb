"""What the tests share beside their fixtures (tests/conftest.py): the fixtures' paths, the error
metric, reference runs and the parity report, checks of answers, what a test needs before it can
run, and servers to run against. Nothing here asserts a duration."""
