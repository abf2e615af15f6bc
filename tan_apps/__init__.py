"""The applications built on the tan library: the commands (commands/: tan-train, tan-test,
tan-predict, ...; cli/: what they share), the demo's web page (demo/), the seed launcher (seeds/: tan-train
--seeds and its summary), the converters (converters/: tan-convert-features), the
full-scale stand-ins of the benchmarks (standin.py) and the generated data (synthetic/).

They import the library (tan/); the library never imports them (tests/test_architecture.py)."""
