"""The equivalence oracles: each built-in model computed the way its reference's own
code computes it (reference_2dtan: chenjoya/2dtan; reference_mmn: MCG-NJU/MMN;
reference_ms2dtan and reference_tan_msra: microsoft/VideoX), written plainly, with
no memory path. The tests hold tan's models equal to them; tools/benchmark.py runs
them as its baselines."""
