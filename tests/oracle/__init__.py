"""Independent plain-Python oracle of Pulsar's managed-ledger arithmetic (SPEC §1, §2) for property tests.

Written straight from SPEC.md's pseudo-code, deliberately without looking at ``pulsar_model``: the
property tests compare the DataFrame transforms with this oracle on random managed-ledger states.
"""
