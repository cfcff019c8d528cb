"""What the whole library agrees on: Pulsar versions and the behaviour flags each one selects
(``versions``). Imports nothing of the project but :mod:`pulsar_model.errors`.
"""
