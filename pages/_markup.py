"""The pages' escaping of user strings: owned by ``eval.reports.markup`` (which ``report.md``
uses too); re-exported here for the pages."""

from eval.reports.markup import code, html, md  # noqa: F401
