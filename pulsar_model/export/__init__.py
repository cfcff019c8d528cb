"""``pulsar-analytics export``: export live Pulsar clusters over the admin REST API (plain Python, no Spark).

* :mod:`pulsar_model.export.options` - validated options (targets, filters, limits, auth, TLS);
* :mod:`pulsar_model.export.client` - the HTTP client (redirects, retries, rate limit, permissions);
* :mod:`pulsar_model.export.ranges` - which entries a topic's ``internalStats`` says to fetch;
* :mod:`pulsar_model.export.writer` - atomic files, the resume journal;
* :mod:`pulsar_model.export.runner` - the walk over clusters, namespaces and topics, the manifest.

The layout written is the README's "Export layout" plus ``rest-entries/``; docs/semantics/export-rest.md
describes the entry endpoint and what its responses cannot carry.
"""

from pulsar_model.export.options import ClusterTarget, ExportOptions, TlsOptions, resolve_token
from pulsar_model.export.runner import ExportSummary, run_export, run_with

__all__ = [
    "ClusterTarget",
    "ExportOptions",
    "ExportSummary",
    "TlsOptions",
    "resolve_token",
    "run_export",
    "run_with",
]
