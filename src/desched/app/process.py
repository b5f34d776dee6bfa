"""The process services ``desched run`` builds from its (already checked) flags, once: the serving
TLS context, the tracer, the cron schedule. The CLI parses and checks the flags and hands their
values over as these plain records; building what they describe is the app's (issue 29: the
composition root is app/, not the command line)."""

from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass

from desched.runtime.schedule import CronSchedule, parse_schedule
from desched.runtime.tls import parse_curves, server_context, serving_certificate
from desched.runtime.tracing import Tracing, TracingOptions, setup

__all__ = ["CronSpec", "ServingTLS", "TracingOptions", "cron_schedule", "serving_tls", "tracing"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServingTLS:
    """The serving certificate and TLS settings (--tls-*, --cert-dir); ``secure`` is False with
    --http (plain HTTP on the serving port: the curves are still checked, nothing is built)."""

    cert_file: str = ""
    key_file: str = ""
    cert_dir: str = ""
    min_version: str = ""
    cipher_suites: tuple[str, ...] = ()
    sni_cert_keys: tuple[str, ...] = ()
    curve_preferences: tuple[str, ...] = ()
    secure: bool = True


@dataclass(frozen=True)
class CronSpec:
    """--descheduling-interval-cron-expression and its --descheduling-interval-cron-time-zone."""

    expression: str
    time_zone: str | None = None


def tracing(options: TracingOptions | None) -> Tracing | None:
    """The tracer of --otel-collector-endpoint (None: no tracing)."""
    return setup(options) if options is not None and options.endpoint else None


def serving_tls(options: ServingTLS | None) -> ssl.SSLContext | None:
    """The serving port's TLS context (None: no TLS, or nothing served)."""
    if options is None:
        return None
    curves = parse_curves(options.curve_preferences)
    if curves and not hasattr(ssl.SSLContext, "set_groups"):
        log.warning(
            "--tls-curve-preferences is checked but not applied: this Python's ssl module cannot "
            "choose the key-exchange groups (SSLContext.set_groups); the TLS library's defaults are used"
        )
    if not options.secure:
        return None
    cert, key = serving_certificate(options.cert_file, options.key_file, options.cert_dir)
    return server_context(
        cert,
        key,
        min_version=options.min_version,
        cipher_suites=options.cipher_suites,
        sni_cert_keys=options.sni_cert_keys,
        curves=curves,
    )


def cron_schedule(spec: CronSpec | None) -> CronSchedule | None:
    """The wall-clock schedule of the cycles (None: an interval, or one cycle)."""
    return parse_schedule(spec.expression, spec.time_zone) if spec is not None else None
