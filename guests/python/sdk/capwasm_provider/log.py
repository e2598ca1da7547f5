"""Structured logging into the host's log, which attributes each line to
the provider and the object of the call. Never log credentials or
bootstrap data."""

from wit_world.imports import log as wit


def _log(level, message, fields):
    wit.log(level, message, [(key, str(value)) for key, value in fields.items()])


def debug(message, **fields):
    _log(wit.Level.DEBUG, message, fields)


def info(message, **fields):
    _log(wit.Level.INFO, message, fields)


def warn(message, **fields):
    _log(wit.Level.WARN, message, fields)


def error(message, **fields):
    _log(wit.Level.ERROR, message, fields)
