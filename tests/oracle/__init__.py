"""Independent plain-Python oracle of Pulsar's managed-ledger arithmetic (docs §1, §2) for property tests.

Written straight from the semantics pages' pseudo-code, deliberately without looking at ``pulsar_model``: the
property tests compare the DataFrame transforms with this oracle on random managed-ledger states.
"""
