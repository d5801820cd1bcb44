"""Machinery that knows no domain: settings, the database engine and sessions, errors, SQL helpers,
pagination, uploads, middleware, background threads, caches and computing off the request worker."""
